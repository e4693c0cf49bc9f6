"""A process that runs `graphbench` command lines under a memory limit, one case per line of stdin.

The fuzz tests (tests/test_fuzz_commands.py) start it with an address-space limit (RLIMIT_AS) and
send each case as a JSON line {"args": [...], "env": {...}}; it answers one JSON line per case:
the exit code, stderr, the end of stdout, the exception's traceback if one escaped, and the seconds
taken. The parent kills it when a case overruns its timeout, so a hang is a failure too, and starts a
new one. Running the cases in one process keeps the imports (torch among them) paid once.

    python tests/fuzz_worker.py <limit in MiB> <working folder>
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback


def main() -> None:
    limit_mib, workdir = int(sys.argv[1]), sys.argv[2]
    limit = limit_mib << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.chdir(workdir)  # commands that write next to where they run write here
    from typer.testing import CliRunner

    from graphbench.cli.main import app

    runner = CliRunner()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        start = time.perf_counter()
        try:
            result = runner.invoke(app, case["args"], env=case.get("env") or None)
            code, stdout, stderr = result.exit_code, result.stdout, result.stderr
            escaped = None
            if result.exc_info is not None and not issubclass(result.exc_info[0], SystemExit):
                escaped = "".join(traceback.format_exception(*result.exc_info))
        except BaseException:  # noqa: BLE001 - the runner itself failed (MemoryError while rendering, ...)
            code, stdout, stderr, escaped = -1, "", "", traceback.format_exc()
        answer = {"exit": code, "stderr": stderr[-4000:], "stdout": stdout[-2000:], "traceback": escaped,
                  "seconds": time.perf_counter() - start}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
