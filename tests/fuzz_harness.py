"""What the command fuzzers share: a worker under a memory limit with a timeout per case, hostile
files, hostile values, and mutations of valid input files.

A case is one `graphbench` command line; it passes when the command exits 0 or 2 (1 only where the
command defines it, the gate's regression), prints no traceback, says an error in one `error:` line,
and finishes within CASE_TIMEOUT_S under an address-space limit of LIMIT_MIB (the bounds the held-out
bad inputs are checked with).
"""

from __future__ import annotations

import copy
import json
import math
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

CASE_TIMEOUT_S = 60.0
LIMIT_MIB = 4096
ROOT = Path(__file__).resolve().parents[1]


class Worker:
    """tests/fuzz_worker.py in a child process; a case that overruns its time kills it (a new one starts)."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env, self.proc = workdir, env, None

    def _start(self) -> None:
        env = dict(os.environ, **self.env, PYTHONPATH=str(ROOT / "src"))
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fuzz_worker.py"), str(LIMIT_MIB), str(self.workdir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        ready = self._read(120.0)
        assert ready == {"ready": True}, f"the fuzz worker did not start: {ready}"

    def _read(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc is not None and self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not readable:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def run(self, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
        """The worker's answer, or {"exit": "timeout"} / {"exit": "died", ...}."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"args": args, "env": env or {}}) + "\n")
        self.proc.stdin.flush()
        answer = self._read(CASE_TIMEOUT_S)
        if answer is None:
            hung = self.proc.poll() is None
            self.close()
            return {"exit": "timeout" if hung else "died", "returncode": self.proc.returncode}
        return answer

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def check(answer: dict[str, Any], args: list[str], allowed: tuple[int, ...] = (0, 2)) -> None:
    """Assert the case ended as a command must: an allowed exit, no traceback, a one-line error."""
    where = f"graphbench {' '.join(args)!r}"
    assert answer["exit"] in allowed, (where, {k: v[-1500:] if isinstance(v, str) else v for k, v in answer.items()})
    assert answer.get("traceback") is None, (where, answer["traceback"][-1500:])
    text = answer["stderr"] + answer["stdout"]
    assert "Traceback (most recent call last)" not in text, (where, text)
    if answer["exit"] == 2:
        lines = answer["stderr"].strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (where, answer["stderr"])


def make_hostile_files(folder: Path) -> dict[str, str]:
    """Paths that are not what a command expects: missing, a folder, a device, a FIFO, a link loop,
    empty, binary, not UTF-8, JSON of the wrong shape, NaN, overflow, nesting deep enough to overflow
    a recursive parser, a sparse file past the size caps, a name with non-ASCII letters."""
    folder.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}

    def write(name: str, data: bytes | str) -> None:
        path = folder / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        paths[name] = str(path)

    write("empty.json", b"")
    write("binary.json", bytes(range(256)) * 4)
    write("latin1.csv", "batch_size,count\n1,\xe9\xff\n".encode("latin-1"))
    write("list.json", "[1, 2, 3]")
    write("string.json", '"text"')
    write("nan.json", '{"a": NaN, "batch_size": NaN}')
    write("overflow.json", '{"1": 1e400, "2": 100000000000000000000}')
    write("deep.json", "[" * 200_000 + "]" * 200_000)
    write("junk.toml", "[[[ this is = not toml")
    write("snowman-\u2603.jsonl", '{"arrival_s": 0, "prompt_len": 4, "output_len": 2}\n')
    sparse = folder / "huge.json"
    with open(sparse, "wb") as handle:
        handle.truncate(300 << 20)  # sparse: takes no disk, but a reader that trusts it reads 300 MiB
    paths["huge.json"] = str(sparse)
    (folder / "folder.json").mkdir(exist_ok=True)
    paths["folder.json"] = str(folder / "folder.json")
    fifo = folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    paths["fifo.json"] = str(fifo)
    loop = folder / "loop.json"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    paths["loop.json"] = str(loop)
    zero = folder / "zero.json"
    if not zero.is_symlink():
        zero.symlink_to("/dev/zero")
    paths["zero.json"] = str(zero)
    paths["missing.json"] = str(folder / "missing.json")
    paths["proc"] = "/proc/self/mem"
    paths["under-proc"] = "/proc/self/graphbench-results"
    paths["under-file"] = str(folder / "list.json" / "inside")
    return paths


# Values a hostile user types: out of range, overflowing, not finite, the wrong type, empty, long,
# markup and formulas, path tricks (no absolute system path that a root process could harm).
HOSTILE_TEXT = [
    "", " ", "0", "-1", "1", "3", "1000000000000", "100000000000000000000", "-100000000000000000000",
    "1.5", "64.7", "nan", "NaN", "inf", "-inf", "1e400", "-0", "abc", "\u2603", "x" * 300, "1,2,3", "0,0",
    "1,-1", ",", "1,,2", "3-1", "uniform:1-1000000000000", "uniform:5-2", "uniform:nan-3", "normal:nan",
    "poisson:inf", "=HYPERLINK(\"http://x\")", "<script>alert(1)</script>", "a=b", "model=/tmp/x", "--",
    "-O", "none", "all", "FULL", "cpu", "cuda:7", "tiny-llama",
]


def hostile_values(files: dict[str, str]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(HOSTILE_TEXT), st.sampled_from(sorted(files.values())))


# ---------------------------------------------------------------- mutations of valid files

OVERFLOW = "__graphbench_overflow__"  # written as the JSON number 1e400 (which reads as inf)
REPLACEMENTS = [math.nan, math.inf, -math.inf, OVERFLOW, -1, 0, 10**12, 10**20, -(10**20), 0.5, "", "\u2603",
                "x" * 200, [], {}, None, True, [1, "a", None], {"k": [1]}]


def _nodes(data: Any, path: tuple = ()) -> list[tuple]:
    """Every path into a JSON value (the root included)."""
    found = [path]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _nodes(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _nodes(value, path + (index,))
    return found


@st.composite
def mutated(draw: st.DrawFn, seed: Any, rounds: int = 3) -> Any:
    """A copy of `seed` with 1..rounds nodes replaced by hostile values or removed."""
    data = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(1, rounds))):
        path = draw(st.sampled_from(_nodes(data)))
        value = copy.deepcopy(draw(st.sampled_from(REPLACEMENTS)))  # never the shared original
        if not path:
            data = value
            continue
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            parent.pop(path[-1], None)  # a field that is missing
        else:
            parent[path[-1]] = value
    return data


def json_text(data: Any) -> str:
    """JSON as a careless writer makes it: NaN and Infinity tokens, 1e400 for an overflow."""
    return json.dumps(data).replace(f'"{OVERFLOW}"', "1e400")
