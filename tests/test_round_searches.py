"""Each sweep round on a kernel search of its own (bench/round_searches.py, runner/kernel_search.py), on the CPU:
which processes get which round's search, the config they run, the search process, and what a failed search
leaves. The timing itself needs a GPU (tests/gpu/)."""

from __future__ import annotations

import json
import sys

import pytest

from graphbench.bench import round_searches
from graphbench.bench.sweep_grid import build_grid
from graphbench.bench.sweep_plan import plan_rounds, write_point_config
from graphbench.config import EngineConfig, load_engine_config
from graphbench.config.parts import ModelConfig
from graphbench.errors import GraphbenchError


def _planned(rounds: int, folders=("",), peers=()):
    points = build_grid({"model.model": "tiny-llama"}, {"level": [1, 2], "ladder": ["default"]}, list(peers))
    return plan_rounds(points, rounds, 0, "0123456789abcdef", folders)


def test_every_round_after_the_first_and_every_folder_after_the_first_gets_its_own_search():
    planned = _planned(3, peers=["hf-eager"])
    rounds = round_searches.assign_searches(planned, "0123456789abcdef", ("",))
    assert list(rounds) == ["0123456789ab-r2", "0123456789ab-r3"]
    for point in planned:
        index = point.round["index"]
        expected = "" if index == 1 or point.system != "graphbench" else f"0123456789ab-r{index}"
        assert point.kernel_search == expected, (point.label, index)
    assert sorted(p.label for p in rounds["0123456789ab-r2"]) == ["O1_default", "O2_default"]
    # --aa: folder b's first round would share a's cold starts' search; it gets its own
    planned = _planned(2, folders=("a", "b"))
    rounds = round_searches.assign_searches(planned, "0123456789abcdef", ("a", "b"))
    assert sorted(rounds) == ["0123456789ab-a-r2", "0123456789ab-b-r1", "0123456789ab-b-r2"]
    assert {p.kernel_search for p in planned if p.folder == "a" and p.round["index"] == 1} == {""}


def test_a_round_s_config_names_its_search_and_keeps_its_hash(tmp_path):
    planned = _planned(2)
    round_searches.assign_searches(planned, "0123456789abcdef", ("",))
    first, second = (next(p for p in planned if p.label == "O2_default" and p.round["index"] == i) for i in (1, 2))
    paths = write_point_config(first, tmp_path), write_point_config(second, tmp_path)
    assert paths[0] != paths[1]  # a file per round: two GPUs may run two rounds of one point at once
    configs = [load_engine_config(path) for path in paths]
    assert [c.model.kernel_search for c in configs] == ["", "0123456789ab-r2"]
    assert configs[0].compute_hash() == configs[1].compute_hash()  # the same compile-cache entry
    assert ModelConfig(kernel_search="a.b_c-1").kernel_search == "a.b_c-1"
    for bad in ("../up", "a b", "x" * 65, 3):
        with pytest.raises(GraphbenchError, match="kernel_search"):
            ModelConfig(kernel_search=bad)


def test_the_search_process_times_nothing_without_a_gpu_and_a_failed_search_leaves_its_round_on_the_first(
        tmp_path, monkeypatch):
    """The real search process: on the CPU no engine times kernels, so it answers 'nothing to time'; a search
    that fails (here: a model it cannot build) clears its round's name, so the round runs on round 1's choices."""
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "root"))
    planned = _planned(2)
    rounds = round_searches.assign_searches(planned, "0123456789abcdef", ("",))
    lines = []
    round_searches.run_searches(rounds, tmp_path / "work", on_search=lines.append)
    assert lines == ["kernel search 1 of 1 (0123456789ab-r2): timing the projection kernels",
                     "kernel search 0123456789ab-r2: nothing to time"], lines
    summary = json.loads((tmp_path / "work" / "search-0123456789ab-r2.json").read_text())
    assert len(summary) == 2 and all(s["seconds"] is None for s in summary)  # O1 and O2: one file each
    assert {p.kernel_search for p in rounds["0123456789ab-r2"]} == {"0123456789ab-r2"}
    for point in rounds["0123456789ab-r2"]:
        point.overrides = {**point.overrides, "model.model": str(tmp_path / "no-such-checkpoint")}
    lines.clear()
    round_searches.run_searches(rounds, tmp_path / "work", on_search=lines.append)
    assert lines[1].startswith("kernel search 0123456789ab-r2 failed (exit code 1") and \
        lines[1].endswith("its round runs on its first round's choices"), lines
    assert {p.kernel_search for p in rounds["0123456789ab-r2"]} == {""}


def test_a_search_that_hangs_is_stopped_at_its_timeout(tmp_path, monkeypatch):
    planned = _planned(2)
    rounds = round_searches.assign_searches(planned, "0123456789abcdef", ("",))
    monkeypatch.setattr(round_searches.sys, "executable", sys.executable)
    real = round_searches.run_child
    monkeypatch.setattr(round_searches, "run_child",
                        lambda cmd, *a, **k: real([sys.executable, "-c", "import time; time.sleep(30)"], *a, **k))
    lines = []
    round_searches.run_searches(rounds, tmp_path, timeout_s=0.5, on_search=lines.append)
    assert "failed (timed out after 0.5 s)" in lines[-1]
    assert {p.kernel_search for p in rounds["0123456789ab-r2"]} == {""}


def test_a_sweep_s_searches_are_removed_when_it_ends(tmp_path, monkeypatch):
    from graphbench.runner.compile.cache import kernel_choices_dir

    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path))
    folder = kernel_choices_dir()
    folder.mkdir(parents=True)
    names = ["GPU-pdl-abc.json", "GPU-pdl-abc-0123456789ab-r2.json", "GPU-no-pdl-abc-0123456789ab-r3.json",
             "GPU-pdl-abc-ffffffffffff-r2.json"]
    for name in names:
        (folder / name).write_text("{}")
    round_searches.remove_searches(["0123456789ab-r2", "0123456789ab-r3"])
    assert sorted(p.name for p in folder.iterdir()) == ["GPU-pdl-abc-ffffffffffff-r2.json", "GPU-pdl-abc.json"]


def test_a_cpu_sweep_with_round_searches_runs_its_rounds_and_leaves_no_search_behind(tmp_path, monkeypatch):
    """run_sweep(search_rounds=True) end to end on the CPU (where the searches time nothing): every round
    runs, round 2's process ran with its round's name in its config, and the progress lines say so."""
    from graphbench.bench.sweep import run_sweep
    from graphbench.reports.store import load_results

    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "root"))
    points = build_grid({"model.model": "tiny-llama", "scheduler.max_num_seqs": 4}, {"level": [0], "ladder": ["default"]}, [])
    lines = []
    args = ["--device", "cpu", "--concurrency", "1", "--prompt-len", "8", "--output-len", "2", "--repeats", "1"]
    result = run_sweep(points, tmp_path / "r", args, timeout_s=300, resume=False, rounds=2, search_rounds=True,
                       on_search=lines.append)
    assert [o.status for o in result.outcomes] == ["ok", "ok"], [o.reason for o in result.outcomes]
    assert len(lines) == 2 and lines[1].endswith("nothing to time")
    files = load_results([tmp_path / "r"], merge=False).results
    searches = {f["sweep"]["round"]["index"]: f["config"]["model"]["kernel_search"] for f in files}
    assert searches[1] == "" and searches[2].endswith("-r2")
    assert not any((tmp_path / "root" / "kernel_choices").glob("*-r2.json"))


def test_config_files_list_every_field_a_round_sets():
    assert "kernel_search" in EngineConfig().to_dict()["model"]
