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
from graphbench.config import load_engine_config
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


def test_the_search_process_times_nothing_without_a_gpu_and_a_config_that_fails_leaves_its_points_on_round_1(
        tmp_path, monkeypatch):
    """The real search process: on the CPU no engine times kernels, so it answers 'nothing to time'; a config it
    cannot build (here: a checkpoint folder that is not there) clears that config's points' name alone, so they
    run on round 1's choices while the round's other configs keep their search."""
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "root"))
    planned = _planned(2)
    rounds = round_searches.assign_searches(planned, "0123456789abcdef", ("",))
    lines = []
    round_searches.run_searches(rounds, tmp_path / "work", on_search=lines.append)
    assert lines == ["kernel search 1 of 1 (0123456789ab-r2): timing the projection kernels",
                     "kernel search 0123456789ab-r2: nothing to time"], lines
    summary = json.loads((tmp_path / "work" / "search-0123456789ab-r2.json").read_text())
    assert summary == [{"seconds": None}, {"seconds": None}]  # O1 and O2: one config file each
    assert {p.kernel_search for p in rounds["0123456789ab-r2"]} == {"0123456789ab-r2"}
    o1 = next(p for p in rounds["0123456789ab-r2"] if p.label == "O1_default")
    o1.overrides = {**o1.overrides, "model.model": str(tmp_path / "no-such-checkpoint")}
    lines.clear()
    round_searches.run_searches(rounds, tmp_path / "work", on_search=lines.append)
    assert len(lines) == 3 and lines[1].startswith("kernel search 0123456789ab-r2 failed for O1_default (") and \
        "no-such-checkpoint" in lines[1] and lines[1].endswith("run on their first round's choices"), lines
    assert {p.label: p.kernel_search for p in rounds["0123456789ab-r2"]} == {"O1_default": "",
                                                                             "O2_default": "0123456789ab-r2"}


def test_a_search_process_that_dies_leaves_its_round_on_round_1_and_a_stop_is_no_failure(tmp_path, monkeypatch):
    rounds = round_searches.assign_searches(_planned(3), "0123456789abcdef", ("",))
    real = round_searches.run_child
    monkeypatch.setattr(round_searches, "run_child",
                        lambda cmd, *a, **k: real([sys.executable, "-c", "import sys; sys.exit('CUDA error: out of memory')"], *a, **k))
    lines = []
    round_searches.run_searches(rounds, tmp_path, on_search=lines.append)
    assert lines[1].startswith("kernel search 0123456789ab-r2 failed (") and "CUDA error: out of memory" in lines[1]
    assert lines[1].endswith("its round runs on its first round's choices") and len(lines) == 4, lines
    assert {p.kernel_search for points in rounds.values() for p in points} == {""}
    rounds = round_searches.assign_searches(_planned(3), "0123456789abcdef", ("",))
    monkeypatch.setattr(round_searches, "run_child",
                        lambda cmd, *a, **k: real([sys.executable, "-c", "import time; time.sleep(30)"], *a, **k))
    stops = iter([False, True])  # stopped during the first search: it is interrupted, the second never starts
    lines.clear()
    round_searches.run_searches(rounds, tmp_path, on_search=lines.append, stop=lambda: next(stops, True))
    assert lines == ["kernel search 1 of 2 (0123456789ab-r2): timing the projection kernels",
                     "kernel search 0123456789ab-r2 failed (interrupted): its round runs on its first round's choices"]


def test_engines_that_time_no_kernels_or_compile_sizes_get_no_search():
    points = build_grid({"model.model": "tiny-llama"}, {"level": [0, 1, 2, 3], "ladder": ["default"]}, [])
    points += build_grid({"model.model": "tiny-llama", "model.kernels": "torch"}, {"level": [2]}, [])
    points += build_grid({"model.model": "tiny-llama", "model.device": "cpu"}, {"level": [2]}, [])
    planned = plan_rounds(points, 2, 0, "0123456789abcdef", ("",))
    rounds = round_searches.assign_searches(planned, "0123456789abcdef", ("",))
    assert sorted(p.label for p in rounds["0123456789ab-r2"]) == ["O1_default", "O2_default"]


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
    names = ["GPU-pdl-abc.json", "GPU-pdl-abc-0123456789ab-r2.json", "GPU-no-pdl-abc-0123456789ab-b-r1.json",
             "GPU-pdl-abc-ffffffffffff-r2.json"]
    for name in names:
        (folder / name).write_text("{}")
    round_searches.remove_searches("0123456789abcdef")
    assert sorted(p.name for p in folder.iterdir()) == ["GPU-pdl-abc-ffffffffffff-r2.json", "GPU-pdl-abc.json"]


def test_a_cpu_sweep_with_round_searches_runs_its_rounds_and_leaves_no_search_behind(tmp_path, monkeypatch):
    """run_sweep(search_rounds=True) end to end on the CPU, with every point taken to run on a search (on the CPU
    the search process times nothing): every round runs, round 2's process ran with its round's name in its
    config, the progress lines say so, and the sweep's stored searches are gone at its end (another sweep's
    stay); with --resume only the rounds still to run are searched."""
    from graphbench.bench import sweep_resume
    from graphbench.bench.sweep import run_sweep
    from graphbench.reports.store import load_results
    from graphbench.runner.compile.cache import kernel_choices_dir

    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "root"))
    monkeypatch.setattr(round_searches, "runs_on_a_search", lambda point: True)
    monkeypatch.setattr(sweep_resume.uuid, "uuid4", lambda: type("U", (), {"hex": "feedfacecafe" + "0" * 20})())
    kernel_choices_dir().mkdir(parents=True)
    (kernel_choices_dir() / "GPU-pdl-abc-feedfacecafe-r2.json").write_text("{}")  # (as a search would leave it)
    (kernel_choices_dir() / "GPU-pdl-abc-0123456789ab-r2.json").write_text("{}")  # another sweep's
    points = build_grid({"model.model": "tiny-llama", "scheduler.max_num_seqs": 4}, {"level": [0], "ladder": ["default"]}, [])
    lines = []
    args = ["--device", "cpu", "--concurrency", "1", "--prompt-len", "8", "--output-len", "2", "--repeats", "1"]
    result = run_sweep(points, tmp_path / "r", args, timeout_s=300, resume=False, rounds=2, search_rounds=True,
                       on_search=lines.append)
    assert [o.status for o in result.outcomes] == ["ok", "ok"], [o.reason for o in result.outcomes]
    assert lines == ["kernel search 1 of 1 (feedfacecafe-r2): timing the projection kernels",
                     "kernel search feedfacecafe-r2: nothing to time"]
    files = load_results([tmp_path / "r"], merge=False).results
    searches = {f["sweep"]["round"]["index"]: f["config"]["model"]["kernel_search"] for f in files}
    assert searches == {1: "", 2: "feedfacecafe-r2"}
    assert [p.name for p in kernel_choices_dir().iterdir()] == ["GPU-pdl-abc-0123456789ab-r2.json"]
    assert not list((tmp_path / "r").rglob("search-*"))  # (JSON files in a results folder read as foreign results)
    lines.clear()  # --resume with every round measured: nothing to search
    run_sweep(points, tmp_path / "r", args, timeout_s=300, resume=True, rounds=2, search_rounds=True, on_search=lines.append)
    assert lines == []


def test_reports_tell_engines_apart_without_the_round_s_search():
    """A merged record keeps its first round's config, which in --aa's second folder names that folder's search:
    tables that pair engines (ladder pairs, speculative k = 0) must not take that as another engine."""
    from graphbench.reports.ladder_pairs import _engine_key
    from graphbench.reports.point_names import engine_config

    a = {"config": {"model": {"model": "tiny-llama", "kernel_search": ""}, "compilation": {"cudagraph_capture_sizes": [1]}},
         "system": "graphbench"}
    b = {**a, "config": {**a["config"], "model": {"model": "tiny-llama", "kernel_search": "0123456789ab-b-r1"}}}
    assert engine_config(a) == engine_config(b) == {"model": {"model": "tiny-llama"},
                                                    "compilation": {"cudagraph_capture_sizes": [1]}}
    assert _engine_key(a) == _engine_key(b)
    other = {**a, "config": {**a["config"], "model": {"model": "tiny-llama", "kernels": "torch"}}}
    assert _engine_key(other) != _engine_key(a)
    assert a["config"]["model"]["kernel_search"] == ""  # (a copy: the result is left as it was)


def test_the_sweep_summary_says_on_how_many_shapes_the_rounds_searches_chose_apart():
    from graphbench.reports.kernel_choices_diff import round_searches_note

    def start(search, kernel):
        choices = [{"op": "linear", "n": 960, "k": 576, "rows": 1, "kernel": kernel, "blocks": [8, 64, 2]},
                   {"op": "linear", "n": 576, "k": 576, "rows": 1, "kernel": "gemv", "blocks": [8, 64, 2]}]
        return {"kernel_choices": {"source": "shared" if search else "loaded", "search": search, "choices": choices}}

    searched = {"label": "O2_default", "startups": [start("", "gemv"), start("ab-r2", "torch"), start("ab-r3", "gemv")]}
    shared = {"label": "O1_default", "startups": [start("", "gemv"), start("", "gemv")]}
    note = round_searches_note([searched, shared], lambda r: r["label"])
    assert note is not None and "O2_default 1 of 2 projection shapes" in note and "O1_default" not in note
    assert round_searches_note([shared], lambda r: r["label"]) is None  # a CPU or Ray sweep's: no line
