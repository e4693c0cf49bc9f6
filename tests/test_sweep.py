"""`graphbench sweep` on the CPU: grid, dry run, failures recorded, resume."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from graphbench.bench.sweep import build_grid, load_sweep_file
from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results

runner = CliRunner()
# one process per point (--rounds 1) unless the test is about rounds: each round is a `graphbench run` of its own
FAST = ["--device", "cpu", "--ladders", "default", "--concurrency", "1,2", "--prompt-len", "16", "--output-len", "4",
        "--repeats", "1", "--max-num-seqs", "8", "--peers", "none", "--rounds", "1"]


def fast(**options: str) -> list[str]:
    """FAST with some options' values changed: fast(repeats="2", rounds="3")."""
    args = list(FAST)
    for name, value in options.items():
        args[args.index(f"--{name.replace('_', '-')}") + 1] = value
    return args


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
    assert "O0_default" in result.stdout and "O1_default" in result.stdout
    assert "2 points, 2 processes (1 round(s) of each graphbench point" in " ".join(result.stdout.split())
    rounds = runner.invoke(app, ["sweep", *fast(rounds="3"), "--levels", "0,1", "--order-seed", "7", "--dry-run"])
    assert rounds.exit_code == 0, rounds.output
    assert "2 points, 6 processes (3 round(s) of each graphbench point; order seed 7)" in " ".join(rounds.stdout.split())
    aa = runner.invoke(app, ["sweep", *fast(rounds="2"), "--levels", "0", "--aa", "--dry-run"])
    assert aa.exit_code == 0 and "1 points, 4 processes (2 round(s) of each graphbench point, twice: A/A" \
        in " ".join(aa.stdout.split()), aa.output
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
    other = runner.invoke(app, ["sweep", *fast(repeats="2"), "--levels", "0", "--grid",
                                "num_blocks=64", "--results", str(results), "--resume"])
    assert other.exit_code == 0, other.output
    assert ("ok O0_default_num_blocks=64" in " ".join(other.stdout.split())
            and "re-measured (--resume): its result was measured with another workload options or repeats"
            in " ".join(other.stdout.split())), other.stdout
    files = [r["label"] for r in load_results([results], merge=False).results if r["status"] == "ok"]
    assert files.count("O0_default_num_blocks=64") == 2  # the old process's file and the new one's


def test_a_point_re_measured_under_resume_is_not_merged_with_its_stale_rounds(tmp_path):
    results = tmp_path / "results"
    first = runner.invoke(app, ["sweep", *fast(concurrency="1", rounds="2"), "--levels", "0", "--results", str(results)])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["sweep", *fast(concurrency="1", rounds="2", repeats="2"), "--levels", "0",
                                "--results", str(results), "--resume"])
    assert again.exit_code == 0, again.output
    assert "re-measured (--resume)" in " ".join(again.stdout.split())
    files = load_results([results], merge=False).results
    assert len(files) == 4 and len({json.dumps(f["sweep"]["identity"]) for f in files}) == 2
    by_path = {f["_path"]: f["sweep"]["identity"] for f in files}
    for record in load_results([results]).results:  # no record mixes processes measured otherwise
        assert len({json.dumps(by_path[path]) for path in record["_paths"]}) == 1, record["rounds"]


def test_each_point_runs_in_rounds_of_processes_that_load_as_one_record(tmp_path):
    """--rounds 3: three `graphbench run` processes of the point, each writing its own file (sweep.round),
    loaded back as one record whose samples are the processes' medians."""
    result = runner.invoke(app, ["sweep", *fast(rounds="3", concurrency="1"), "--levels", "0", "--order-seed", "11",
                                 "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert all(f"ok O0_default r{i}" in text for i in (1, 2, 3))
    files = load_results([tmp_path], merge=False).results
    infos = [f["sweep"]["round"] for f in files]
    assert sorted(i["index"] for i in infos) == [1, 2, 3] and {i["of"] for i in infos} == {3}
    assert {i["seed"] for i in infos} == {11} and len({i["id"] for i in infos}) == 1  # one sweep
    (record,) = load_results([tmp_path]).results
    assert [r["index"] for r in record["rounds"]] == [1, 2, 3] and len(record["_paths"]) == 3
    (workload,) = record["workloads"]
    assert workload["summary"]["output_tokens_per_s"]["n"] == 3  # over the processes, not the repeats
    assert len(workload["round_medians"]) == 3 and [r["round"] for r in workload["repeats"]] == [1, 2, 3]
    # the cold start is round 1's; every later process starts warm
    assert [(s["round"], s["cold"]) for s in record["startups"]] == [(1, True), (1, False), (2, False), (3, False)]


def test_an_a_a_sweep_measures_the_grid_twice_and_counts_false_alarms(tmp_path):
    import json as _json

    result = runner.invoke(app, ["sweep", *fast(rounds="2", concurrency="1"), "--levels", "0", "--aa",
                                 "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert all(f"ok {side}/O0_default r{i}" in text for side in "ab" for i in (1, 2)), text
    assert "A/A: " in text and "false alarm(s)" in text
    for side in "ab":
        (record,) = load_results([tmp_path / side]).results
        assert len(record["rounds"]) == 2 and record["sweep"]["round"]["id"].endswith(f"/{side}")
    check = _json.loads((tmp_path / "aa.json").read_text())
    assert check["comparisons"] > 0 and check["gate_checks"] > 0 and check["gate_exit"] in (0, 1, 3)
    assert check["false_alarms"] == check["compare"]["improved"] + check["compare"]["regressed"] + \
        check["gate"].get("regressed", 0)
    assert (tmp_path / "report" / "report.md").is_file()


def test_timeout_is_a_failed_point(tmp_path):
    result = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--results", str(tmp_path), "--timeout", "0.5"])
    assert result.exit_code == 1  # the only point failed: nothing was measured
    assert "1 point(s) failed" in result.output and "no point was measured" in result.output
    (r,) = load_results([tmp_path]).results
    assert r["status"] == "failed" and r["failure"]["reason"] == "timed out after 0.5 s"
    assert r["sweep"]["round"]["index"] == 1  # the failed process's round is recorded


def test_a_point_failing_in_every_round_counts_as_one_failed_point(tmp_path):
    result = runner.invoke(app, ["sweep", *fast(rounds="2"), "--levels", "0", "--results", str(tmp_path),
                                 "--timeout", "0.5"])
    assert result.exit_code == 1 and "no point was measured" in result.output
    assert "1 point(s) failed" in result.output, result.output


def test_tuned_ladder_point_is_tuned_from_the_measured_batch_sizes(tmp_path):
    points = build_grid({"model.model": "tiny-llama"}, {"level": [0], "ladder": ["default", "tuned:3"]}, [])
    assert [(p.label, p.tuned_graphs) for p in points] == [("O0_default", None), ("O0_tuned3", 3)]
    result = runner.invoke(app, ["sweep", "--device", "cpu", "--levels", "0", "--ladders", "default,tuned:3",
                                 "--concurrency", "1,3", "--prompt-len", "16", "--output-len", "6", "--repeats", "1",
                                 "--max-num-seqs", "8", "--peers", "none", "--rounds", "2", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    by_label = {r["label"]: r for r in load_results([tmp_path]).results}
    tuned = by_label["O0_tuned3"]
    assert tuned["status"] == "ok" and len(tuned["rounds"]) == 2
    # tuned once, from round 1's measurement: every round measures the same ladder
    ladders = [f["config"]["compilation"]["cudagraph_capture_sizes"] for f in load_results([tmp_path], merge=False).results
               if f["label"] == "O0_tuned3"]
    assert len(ladders) == 2 and ladders[0] == ladders[1]
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
    """The end-of-sweep table has each workload's tokens/s spread between processes (rounds); above 3% it
    is flagged and counted."""
    from rich.console import Console

    from graphbench.bench.metrics import summarize
    from graphbench.cli.sweep_summary import print_summary as _summary
    from graphbench.reports.store import write_result
    from tests.test_gate import make_result, with_round

    def rounds(folder, c1, c64):
        for i, (a, b) in enumerate(zip(c1, c64), 1):  # two repeats a process, 1 tok/s either side of its median
            result = make_result("O2-default", repeats={"closed-c1": [(a - 1, 12.0), (a + 1, 12.0)],
                                                        "closed-c64": [(b - 1, 12.0), (b + 1, 12.0)]})
            for workload in result["workloads"]:
                workload["summary"] = summarize(workload["repeats"])
            write_result(folder, "m", result["label"], with_round(result, i, len(c1)))

    # closed-c1: processes at 1000 / 1010 / 1005 tok/s -> (1010 - 1000) / 1005 = 0.995%; closed-c64: 30000 /
    # 31500 / 30600 -> 1500 / 30600 = 4.902%
    rounds(tmp_path, [1000.0, 1010.0, 1005.0], [30000.0, 31500.0, 30600.0])
    console = Console(record=True, width=200)
    _summary(console, tmp_path)
    text = console.export_text()
    rows = {line.split("│")[7].strip(): [cell.strip() for cell in line.split("│")] for line in text.splitlines()
            if "closed-c" in line}
    assert rows["closed-c1"][9] == "1.0" and rows["closed-c64"][9] == "4.9"
    assert rows["closed-c1"][8] == "1005" and rows["closed-c64"][8] == "30600"
    assert "1 workload(s) spread more than 3% between processes" in " ".join(text.split())
    assert "outlier" not in text

    # all steady: no warning
    steady = tmp_path / "steady"
    rounds(steady, [1000.0, 1001.0, 1002.0], [30000.0, 30010.0, 30020.0])
    console = Console(record=True, width=200)
    _summary(console, steady)
    assert "spread more than" not in console.export_text()

    # a first process 40% slower than three that agree: excluded (and counted), the spread is the others'
    slow_first = tmp_path / "slow-first"
    rounds(slow_first, [600.0, 1000.0, 1005.0, 1010.0], [30000.0, 30010.0, 30020.0, 30000.0])
    console = Console(record=True, width=200)
    _summary(console, slow_first)
    text = console.export_text()
    c1 = next([cell.strip() for cell in line.split("│")] for line in text.splitlines() if "closed-c1" in line)
    assert c1[8] == "1005" and c1[9] == "1.0"
    assert "1 workload(s) had a first round that was an outlier" in " ".join(text.split())


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
    write_result(tmp_path, "cpu", "O1_default", record)  # outside rounds: round 1
    assert measured_identities(tmp_path) == {("", label, 1): {"run": ["--repeats", "3"]}
                                             for label in ("O1_default", "O1_interactivity", "O2_default")}
    # a round's result counts for its round, in its folder (sweep --aa: a and b)
    second = dict(record, sweep={"identity": {"run": ["--repeats", "2"]}, "round": {"id": "s/a", "index": 2, "of": 3}})
    write_result(tmp_path / "a", "cpu", "O1_default", second)
    assert measured_identities(tmp_path, ("a", "b")) == {("a", label, 2): {"run": ["--repeats", "2"]}
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
