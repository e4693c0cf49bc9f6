"""`graphbench sweep` on the CPU: grid, dry run, failures recorded, resume."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from graphbench.bench.sweep import build_grid, load_sweep_file
from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results

runner = CliRunner()
FAST = ["--device", "cpu", "--ladders", "default", "--concurrency", "1,2", "--prompt-len", "16", "--output-len", "4",
        "--repeats", "1", "--max-num-seqs", "8", "--peers", "none"]


def test_default_grid_is_levels_by_ladders():
    points = build_grid({"model.model": "tiny-llama"}, {"level": [0, 1, 2, 3], "ladder": ["default", "interactivity"]}, [])
    assert [p.label for p in points] == [f"O{lvl}_{ladder}" for lvl in range(4) for ladder in ("default", "interactivity")]
    # cold + warm start-up once per -O level and compiled configuration: -O3's compile_sizes are the
    # ladder's power-of-two rungs <= 8 (1, 2, 4, 8 on both ladders), so its interactivity point is warm
    assert [p.cold for p in points] == [True, False] * 4
    # -O0 records no graph: its interactivity point would run the very same engine, so it is not run
    assert [p.same_as for p in points] == [None, "O0_default"] + [None] * 6
    assert [p.stands_for for p in points] == [["O0_interactivity"]] + [[]] * 7
    # on the CPU no level records graphs: every interactivity point runs its default point's engine, and
    # -O1 and -O2 (same compiled code, every cudagraph mode resolves to NONE) are one engine; -O3 compiles
    # its compile_sizes variants too, so it is another
    on_cpu = build_grid({"model.model": "tiny-llama"}, {"level": [0, 1, 2, 3], "ladder": ["default", "interactivity"]},
                        [], graphs_possible=False)
    assert [p.same_as for p in on_cpu] == [None, "O0_default", None, "O1_default", "O1_default", "O1_default", None,
                                           "O3_default"]
    assert [p.stands_for for p in on_cpu] == [["O0_interactivity"], [], ["O1_interactivity", "O2_default",
                                              "O2_interactivity"], [], [], [], ["O3_interactivity"], []]
    assert "CUDA graphs need a GPU" in on_cpu[2].same_engine_reason
    assert [p.cold for p in on_cpu] == [True, False, True, False, False, False, True, False]
    with_peers = build_grid({"model.model": "tiny-llama"}, {"level": [2]}, ["hf-eager", "hf-compile"])
    assert [(p.label, p.system) for p in with_peers] == [("O2", "graphbench"), ("hf-eager", "hf-eager"),
                                                         ("hf-compile", "hf-compile")]


def test_grid_errors():
    with pytest.raises(GraphbenchError, match="unknown sweep axis 'max_num_seq'.*max_num_seqs"):
        build_grid({}, {"max_num_seq": [1]}, [])
    with pytest.raises(GraphbenchError, match="unknown peer"):
        build_grid({}, {"level": [0]}, ["vllm"])
    with pytest.raises(GraphbenchError, match="optimization level"):
        build_grid({}, {"level": [7]}, [])


def test_sweep_file(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('peers = ["hf-eager"]\n[base]\nmax_num_seqs = 32\n[grid]\nlevel = [0, 2]\n'
                    'cudagraph_mode = ["FULL", "PIECEWISE"]\n[workload]\nconcurrency = [1, 8]\n')
    base, grid, workload = load_sweep_file(path)
    assert base == {"scheduler.max_num_seqs": 32}
    assert grid == {"level": [0, 2], "cudagraph_mode": ["FULL", "PIECEWISE"]}
    assert workload == {"concurrency": [1, 8], "peers": ["hf-eager"]}
    points = build_grid(base, grid, workload["peers"])
    assert len(points) == 5 and points[0].label == "O0_cudagraph_mode=FULL"


def test_dry_run_lists_points():
    result = runner.invoke(app, ["sweep", *FAST, "--levels", "0,1", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "O0_default" in result.stdout and "O1_default" in result.stdout and "2 points" in result.stdout
    both = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--ladders", "default,interactivity", "--dry-run"],
                         env={"COLUMNS": "250"})
    assert both.exit_code == 0 and "= O0_default (same engine, not run again)" in both.stdout, both.output


def test_a_point_running_the_same_engine_is_not_run_and_says_which_it_is(tmp_path):
    from graphbench.bench.sweep import run_sweep

    points = build_grid({"model.model": "tiny-llama"}, {"level": [0], "ladder": ["default", "interactivity"]}, [])
    points[0].same_as = "elsewhere"  # nothing runs
    result = run_sweep(points, tmp_path, [], timeout_s=5, resume=False)
    assert [(o.status, o.reason) for o in result.outcomes] == [
        ("same-engine", "= elsewhere (same engine, measured once)"),
        ("same-engine", "= O0_default (same engine, measured once)")]


def test_failed_point_is_recorded_and_resume_completes(tmp_path):
    results = tmp_path / "results"
    # the second point cannot hold a single request in its KV cache: it fails, the sweep goes on
    result = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--grid", "num_blocks=64,1",
                                 "--results", str(results)])
    assert result.exit_code == 0, result.output
    loaded = load_results([results])
    by_label = {r["label"]: r for r in loaded.results}
    assert by_label["O0_default_num_blocks=64"]["status"] == "ok"
    failed = by_label["O0_default_num_blocks=1"]
    assert failed["status"] == "failed" and "exit code 2" in failed["failure"]["reason"]
    assert "KV blocks" in failed["failure"]["stderr_tail"]
    # --resume measures only what is missing (the failed point again), never the finished one
    again = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--grid", "num_blocks=64,1", "--results", str(results),
                                "--resume"])
    assert again.exit_code == 0
    assert "skipped O0_default_num_blocks=64" in " ".join(again.stdout.split())
    labels = [r["label"] for r in load_results([results]).results if r["status"] == "ok"]
    assert labels.count("O0_default_num_blocks=64") == 1
    # other repeats: the point's result is not this point's any more; it runs again, saying why
    other = runner.invoke(app, ["sweep", *[a if a != "1" else "2" for a in FAST], "--levels", "0", "--grid",
                                "num_blocks=64", "--results", str(results), "--resume"])
    assert other.exit_code == 0, other.output
    assert ("ok O0_default_num_blocks=64" in " ".join(other.stdout.split())
            and "re-measured (--resume): its result was measured with another workload options or repeats"
            in " ".join(other.stdout.split())), other.stdout
    labels = [r["label"] for r in load_results([results]).results if r["status"] == "ok"]
    assert labels.count("O0_default_num_blocks=64") == 2


def test_timeout_is_a_failed_point(tmp_path):
    result = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--results", str(tmp_path), "--timeout", "0.5"])
    assert result.exit_code == 1  # the only point failed: nothing was measured
    assert "1 point(s) failed" in result.output and "no point was measured" in result.output
    (r,) = load_results([tmp_path]).results
    assert r["status"] == "failed" and r["failure"]["reason"] == "timed out after 0.5 s"


def test_tuned_ladder_point_is_tuned_from_the_measured_batch_sizes(tmp_path):
    points = build_grid({"model.model": "tiny-llama"}, {"level": [0], "ladder": ["default", "tuned:3"]}, [])
    assert [(p.label, p.tuned_graphs) for p in points] == [("O0_default", None), ("O0_tuned3", 3)]
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--levels", "0", "--ladders", "default,tuned:3",
                                 "--concurrency", "1,3", "--prompt-len", "16", "--output-len", "6", "--repeats", "1",
                                 "--max-num-seqs", "8", "--peers", "none", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    by_label = {r["label"]: r for r in load_results([tmp_path]).results}
    tuned = by_label["O0_tuned3"]
    assert tuned["status"] == "ok"
    sizes = tuned["config"]["compilation"]["cudagraph_capture_sizes"]
    assert len(sizes) <= 3 and sizes[-1] == 16  # the default top (2 x max_num_seqs) is kept
    assert 1 in sizes and 3 in sizes  # the measured decode batch sizes of concurrency 1 and 3


def test_tuned_first_is_refused_before_anything_runs(tmp_path):
    import shutil
    from pathlib import Path

    result = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--ladders", "tuned:2", "--results", str(tmp_path),
                                 "--dry-run"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: O0_tuned2: a tuned:N ladder is tuned from the batch sizes measured before "
                                     "it; put a default or interactivity ladder first (--ladders default,tuned:N)")
    # a folder that already holds measured points (a resumed or extended sweep) can tune from those
    measured = Path(__file__).parent / "data" / "gate" / "baseline" / "cpu-test"
    shutil.copytree(measured, tmp_path / "cpu-test")
    again = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--ladders", "tuned:2", "--results", str(tmp_path),
                                "--dry-run"])
    assert again.exit_code == 0, again.output
    assert "O0_tuned2" in again.output


def test_sample_sweep_files_build():
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "src" / "graphbench" / "sample_configs" / "sweeps"
    files = sorted(folder.glob("*.toml"))
    assert files
    for path in files:
        base, grid, workload = load_sweep_file(path)
        assert build_grid(base, grid, workload["peers"])


def test_crash_oom_compile_error_and_hang_are_failed_points(tmp_path, monkeypatch):
    """Faults a GPU point produces, injected on the CPU: each is a failed record; the sweep goes on."""
    monkeypatch.setenv("GRAPHBENCH_INJECT_FAULT", "O0_default_max_num_seqs=4:kill,O0_default_max_num_seqs=5:oom,"
                       "O0_default_max_num_seqs=6:compile-error,O0_default_max_num_seqs=7:hang")
    result = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--grid", "max_num_seqs=4,5,6,7,8",
                                 "--results", str(tmp_path), "--timeout", "15"])
    assert result.exit_code == 0, result.output
    by_label = {r["label"]: r for r in load_results([tmp_path]).results}
    reason = {n: by_label[f"O0_default_max_num_seqs={n}"]["failure"]["reason"] for n in (4, 5, 6, 7)}
    assert reason[4].startswith("killed by signal 9")
    assert reason[5].startswith("out of memory") and "80.00 GiB" in reason[5]
    assert reason[6].startswith("exit code 1") and "Inductor compilation failed" in reason[6]
    assert reason[7] == "timed out after 15 s"
    assert "Traceback" in by_label["O0_default_max_num_seqs=6"]["failure"]["stderr_tail"]
    assert by_label["O0_default_max_num_seqs=8"]["status"] == "ok"
    # the report lists the failures
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Failures" in report and "killed by signal 9" in report


def test_summary_shows_the_spread_and_flags_unsteady_workloads(tmp_path):
    """The end-of-sweep table has each workload's tokens/s spread; above 3% it is flagged and counted."""
    from rich.console import Console

    from graphbench.bench.metrics import summarize
    from graphbench.cli.sweep_summary import print_summary as _summary
    from graphbench.reports.store import write_result
    from tests.test_gate import make_result

    # closed-c1: 1000 / 1010 / 1005 tok/s -> (1010 - 1000) / 1005 = 0.995%; closed-c64: 30000 / 31500 /
    # 30600 -> 1500 / 30600 = 4.902%
    result = make_result("O2-default", repeats={"closed-c1": [(1000.0, 12.0), (1010.0, 12.0), (1005.0, 12.0)],
                                                "closed-c64": [(30000.0, 12.0), (31500.0, 12.0), (30600.0, 12.0)]})
    for workload in result["workloads"]:
        workload["summary"] = summarize(workload["repeats"])
    write_result(tmp_path, "m", result["label"], result)
    console = Console(record=True, width=200)
    _summary(console, tmp_path)
    text = console.export_text()
    rows = {line.split("│")[7].strip(): [cell.strip() for cell in line.split("│")] for line in text.splitlines()
            if "closed-c" in line}
    assert rows["closed-c1"][9] == "1.0" and rows["closed-c64"][9] == "4.9"
    assert rows["closed-c1"][8] == "1005" and rows["closed-c64"][8] == "30600"
    assert "1 workload(s) spread more than 3% between repeats" in text

    # all steady: no warning
    for workload in result["workloads"]:
        workload["repeats"] = workload["repeats"][:1] * 3
        workload["summary"] = summarize(workload["repeats"])
    steady = tmp_path / "steady"
    write_result(steady, "m", result["label"], result)
    console = Console(record=True, width=200)
    _summary(console, steady)
    assert "spread more than" not in console.export_text()


def test_summary_shows_start_ups_padding_aliases_and_busy_repeats(tmp_path):
    from rich.console import Console

    from graphbench.bench.metrics import summarize
    from graphbench.cli.sweep_summary import print_summary
    from graphbench.reports.store import write_result
    from tests.test_gate import make_result

    result = make_result("O1_default", repeats={"closed-c6": [(1000.0, 12.0), (700.0, 12.0), (1005.0, 12.0)]})
    result["startups"] = [{"cold": True, "total_s": 24.46, "capture_s": 0.0}, {"cold": False, "total_s": 0.21}]
    result["startup"] = dict(result["startups"][1], capture_s=1.234, graph_memory_bytes=300 * 2**20)
    result["stands_for"] = ["O2_default"]
    workload = result["workloads"][0]
    for repeat, pct in zip(workload["repeats"], (9.0, 9.5, 9.4)):
        repeat.update(padding_token_pct=pct, batch_size_histogram={"6": 30, "5": 10})
    workload.update(summary=summarize(workload["repeats"]), busy_host_repeats=[1], quiet_spread_pct=0.5)
    write_result(tmp_path, "m", result["label"], result)
    console = Console(record=True, width=250)
    print_summary(console, tmp_path)
    text = console.export_text()
    row = next([c.strip() for c in line.split("│")] for line in text.splitlines() if "closed-c6" in line)
    assert row[1:8] == ["O1_default", "graphbench", "ok", "24.5 / 0.2", "1.23", "300", "closed-c6"]
    assert row[9] == "busy host (1/3); 0.5 without"  # not presented as the engine's spread
    assert row[11:13] == ["9.4", "6: 75%, 5: 25% (5-6, 120 steps)"]
    alias = next([c.strip() for c in line.split("│")] for line in text.splitlines() if "O2_default" in line)
    assert alias[1:4] == ["O2_default", "graphbench", "= O1_default"] and alias[7] == "same engine, measured once"
    assert "1 workload(s) had a repeat on a busy host" in text


def test_resume_counts_the_labels_a_result_stands_for(tmp_path):
    from graphbench.bench.sweep import measured_identities
    from graphbench.reports.store import write_result

    record = {"label": "O1_default", "system": "graphbench", "status": "ok", "failure": None,
              "created_utc": "2026-12-01T10:00:00Z", "environment": {}, "model": "tiny-llama", "config": {},
              "config_hash": "x", "sweep": {"identity": {"run": ["--repeats", "3"]}}, "startup": {}, "startups": [],
              "workloads": [], "stands_for": ["O1_interactivity", "O2_default", 7]}
    write_result(tmp_path, "cpu", "O1_default", record)
    assert measured_identities(tmp_path) == {label: {"run": ["--repeats", "3"]}
                                             for label in ("O1_default", "O1_interactivity", "O2_default")}


def test_resume_reruns_a_point_measured_otherwise_and_says_why():
    from graphbench.bench.sweep import point_identity, rerun_reason

    (point,) = build_grid({"model.model": "tiny-llama"}, {"level": [0]}, [])
    identity = point_identity(point, ["--repeats", "3"])
    assert rerun_reason(identity, identity) == ""
    assert rerun_reason(identity, point_identity(point, ["--repeats", "5"])) == \
        "re-measured (--resume): its result was measured with another workload options or repeats"
    other = dict(identity, graphbench="0.0.1", config={**identity["config"], "scheduler.max_num_seqs": 8})
    assert rerun_reason(identity, other) == \
        "re-measured (--resume): its result was measured with another config, graphbench version"
    assert rerun_reason(identity, None) == "re-measured (--resume): its result does not record what it was measured with"


@pytest.mark.parametrize("body, message", [
    ("peers = 5\n", r"peers must be a list of names like \[\"hf-eager\"\], got 5"),
    ('peers = ["hf-eager", 3]\n', "peers must be a list of names"),
    ("base = 3\n", r"base must be a table \(\[base\]\), got 3"),
    ('grid = "level"\n', "grid must be a table"),
])
def test_sweep_files_with_fields_of_the_wrong_type(tmp_path, body, message):
    path = tmp_path / "s.toml"
    path.write_text(body)
    with pytest.raises(GraphbenchError, match=message):
        load_sweep_file(path)
