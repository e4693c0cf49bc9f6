"""Each sweep round on kernel choices of its own: a kernel search apart before the points start.

A GPU's cold start times graphbench's projection kernels and keeps the fastest (runner/kernel_timing.py);
later starts load that search's choices. So a sweep's rounds, all warm after the first, would share one
search, and the noise its verdicts are judged against would leave out how differently another search
chooses: on an H100, cold searches of one commit chose 3-7 of qwen2.5-0.5b's 22 shapes differently and
stepped 1-2% apart at batch 1, where processes sharing one search stepped within 0.3-0.5%
(benchmarks/RESULTS.md, 2026-12-07). Two sweeps on two machines differ by that much and more; the unit of
replication is the process, with the search it would have made.

So before the points run, one process per round after the first (and per --aa folder, whose first round
would otherwise share the other folder's cold start) searches the kernels of every config the round runs
(runner/kernel_search.py: one layer, no start measured) and stores them under the round's name; the round's
points run with config.model.kernel_search set to it and load them as shared choices, each after an unmeasured
warm start in a child process that compiles into the compile-cache entry the kernels those choices name
(bench/cold_start.py; without it the measured warm start compiled them: up to ~0.8 s of qwen2.5-0.5b's 1.8 s,
inferred from capture times). The first round keeps its cold starts' own searches, and so do -O3 points (runs_on_a_search says
why). A gate A/A of two such sweeps passed and ~65 us of GPU time a step was caught (H100, qwen2.5-0.5b,
benchmarks/RESULTS.md, 2026-12-07). The names carry the sweep's id, and the stored files are removed when the
sweep starts and ends. On Ray each node keeps its own store, which a search on this host cannot fill: there the
rounds share their cold starts' searches, as before.

    python -m graphbench.bench.round_searches NAME OUT.json CONFIG.toml [CONFIG.toml ...]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from graphbench.bench.point_process import CHILD_ENV, exit_reason, run_child
from graphbench.bench.sweep_grid import SweepPoint, nest_overrides
from graphbench.errors import GraphbenchError

SEARCH_TIMEOUT_S = 900.0  # one round's search: 5-6 s for qwen2.5-0.5b on an H100, 33 s the machine's first (2026-12-07)


def search_name(sweep_id: str, folder: str, index: int) -> str:
    """The name a round's choices are stored under (config.model.kernel_search): the sweep's, then its round's."""
    return f"{_sweep_part(sweep_id)}-{folder + '-' if folder else ''}r{index}"


def _sweep_part(sweep_id: str) -> str:
    return sweep_id[:12]


def assign_searches(planned: list[SweepPoint], sweep_id: str, folders: tuple[str, ...]) -> dict[str, list[SweepPoint]]:
    """Give every graphbench process after the first round (and of every --aa folder but the first) that times
    kernel choices its round's search name; -> name -> the processes that run on it."""
    rounds: dict[str, list[SweepPoint]] = {}
    searched: dict[str, bool] = {}  # label -> whether its engine runs on a search (the rounds share overrides)
    for point in planned:
        index = (point.round or {}).get("index", 1)
        if point.system != "graphbench" or point.same_as is not None or (index == 1 and point.folder == folders[0]):
            continue
        if point.label not in searched:
            searched[point.label] = runs_on_a_search(point)
        if searched[point.label]:
            point.kernel_search = search_name(sweep_id, point.folder, index)
            rounds.setdefault(point.kernel_search, []).append(point)
    return rounds


def runs_on_a_search(point: SweepPoint) -> bool:
    """Whether the point's engine loads timed kernel choices that a round's search can stand in for: compiled
    (-O1, -O2) with graphbench's kernels, not on the CPU. Not -O0 (nothing timed) nor a point with
    compile_sizes (-O3): a compiled size keeps graphbench's ops or gets Inductor's matmuls by the choices
    installed when it is compiled (compile/pieces.own_kernels_at), so other choices at a warm start would
    compile it again."""
    from graphbench.config import CompileMode, config_from_dict

    try:
        config = config_from_dict(nest_overrides(point.overrides)).resolve()
    except GraphbenchError:
        return False  # (the point itself will say what is wrong)
    return (config.compilation.mode == CompileMode.COMPILE and config.model.kernels == "graphbench"
            and config.model.device != "cpu" and not config.compilation.compile_sizes)


def run_searches(rounds: dict[str, list[SweepPoint]], work_dir: Path | None = None,
                 timeout_s: float = SEARCH_TIMEOUT_S, on_search: Callable[[str], None] = lambda line: None,
                 stop: Callable[[], bool] = lambda: False, extra_env: dict[str, str] | None = None) -> None:
    """Run each round's search in a process of its own, one after another (each a sample of its own, as a
    machine's cold start is). The points of a config whose search fails run on their first round's choices:
    their kernel_search is cleared, and on_search says so. work_dir: where the searches' config files and
    summaries go (None: a temporary folder, not the results folder, whose JSON files are results)."""
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="graphbench-searches-") as folder:
            return run_searches(rounds, Path(folder), timeout_s, on_search, stop, extra_env)
    work_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **CHILD_ENV, PYTHONUNBUFFERED="1", **(extra_env or {}))
    for number, (name, points) in enumerate(rounds.items(), 1):
        if stop():
            return
        on_search(f"kernel search {number} of {len(rounds)} ({name}): timing the projection kernels")
        configs = _write_configs(points, work_dir)
        out = work_dir / f"search-{name}.json"
        out.unlink(missing_ok=True)
        child = run_child([sys.executable, "-m", "graphbench.bench.round_searches", name, str(out),
                           *(str(path) for path in configs)], env, timeout_s, stop)
        summary = _read_summary(out) if child.returncode == 0 else None
        if summary is None or len(summary) != len(configs):
            reason = ("interrupted" if child.stopped else f"timed out after {timeout_s:g} s" if child.timed_out
                      else exit_reason(child.returncode, child.stderr))
            _clear(points)
            on_search(f"kernel search {name} failed ({reason}): its round runs on its first round's choices")
            continue
        for entry, members in zip(summary, configs.values()):
            if entry.get("error"):
                _clear(members)
                on_search(f"kernel search {name} failed for {members[0].label} ({entry['error']}): its processes "
                          "in this round run on their first round's choices")
        timed = [s for s in summary if s.get("seconds") is not None]
        on_search(f"kernel search {name}: {len(timed)} model shape(s) timed in "
                  f"{sum(s['seconds'] for s in timed):.0f} s" if timed else f"kernel search {name}: nothing to time")


def remove_searches(sweep_id: str) -> None:
    """Remove the choices stored under this sweep's names (every GPU's, every round's; a file that will not go
    is left)."""
    from graphbench.runner.compile.cache import clear_kernel_choices, kernel_choice_files

    clear_kernel_choices([path for path in kernel_choice_files() if f"-{_sweep_part(sweep_id)}-" in path.name])


def _clear(points: list[SweepPoint]) -> None:
    for point in points:
        point.kernel_search = ""


def _write_configs(points: list[SweepPoint], work_dir: Path) -> dict[Path, list[SweepPoint]]:
    """One config file per distinct engine the round runs (a search covers each model shape once) -> its points."""
    from graphbench.bench.sweep_plan import toml_file

    groups: dict[str, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(json.dumps(nest_overrides(point.overrides), sort_keys=True, default=str), []).append(point)
    return {toml_file(nest_overrides(members[0].overrides), work_dir / f"search-{i}.toml"): members
            for i, members in enumerate(groups.values())}


def _read_summary(path: Path) -> list[dict] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, list) and all(isinstance(s, dict) for s in data) else None


def main(argv: list[str]) -> None:
    """Search each config's model shapes under the name; one config that fails is recorded, not fatal."""
    from graphbench.config import load_engine_config
    from graphbench.files import write_atomic
    from graphbench.runner.kernel_search import search_apart_for

    name, out, configs = argv[0], Path(argv[1]), argv[2:]
    done: set[str] = set()
    summary = []
    for path in configs:
        try:
            summary.append(search_apart_for(load_engine_config(path), name, done) or {"seconds": None})
        except Exception as exc:  # noqa: BLE001 (any failure: this config's processes run on round 1's choices)
            summary.append({"seconds": None, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"})
    write_atomic(out, json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1:])
