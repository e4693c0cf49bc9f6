"""Rounds: a sweep's processes per point, their order, --resume by round, a history baseline, --aa."""

import json
import random

from typer.testing import CliRunner

from graphbench.bench.sweep import build_grid, measured_identities, plan_rounds
from graphbench.cli.main import app
from graphbench.reports.gate import run_gate
from graphbench.reports.store import write_result

BASE = {"model.model": "tiny-llama", "model.device": "cpu"}


def _grid():
    return build_grid(BASE, {"level": [0, 2], "ladder": ["default"]}, ["hf-eager"], graphs_possible=False)


def test_round_one_keeps_the_grid_order_later_rounds_are_shuffled_by_the_seed():
    points = _grid()
    plan = plan_rounds(points, 3, seed=11, sweep_id="s")
    first = [p for p in plan if p.round["index"] == 1]
    assert [p.label for p in first] == [p.label for p in points]  # cold starts before the points using their cache
    later = [[p.label for p in plan if p.round["index"] == i] for i in (2, 3)]
    graphbench = sorted(p.label for p in points if p.system == "graphbench" and p.same_as is None)
    assert all(sorted(labels) == graphbench for labels in later)  # peers and same-engine points run once
    again = plan_rounds(points, 3, seed=11, sweep_id="s")
    assert [(p.label, p.round["index"]) for p in again] == [(p.label, p.round["index"]) for p in plan]
    assert all(p.round["position"] == i for r in (1, 2, 3)
               for i, p in enumerate((q for q in plan if q.round["index"] == r), 1))


def test_only_round_one_starts_cold_and_every_copy_shares_the_overrides():
    points = _grid()
    plan = plan_rounds(points, 3, seed=1, sweep_id="s")
    assert {p.round["index"] for p in plan if p.cold} == {1}
    by_label = {}
    for p in plan:
        by_label.setdefault(p.label, []).append(p)
    for copies in by_label.values():  # (a tuned:N ladder is tuned once, into the shared dict)
        assert all(c.overrides is copies[0].overrides for c in copies)
    peer = [p for p in plan if p.system == "hf-eager"]
    assert len(peer) == 1 and peer[0].round["of"] == 1


def test_the_orders_of_two_seeds_differ():
    points = build_grid(BASE, {"level": [0, 1, 2, 3], "ladder": ["default"],
                               "max_num_seqs": [8, 16, 32]}, [], graphs_possible=False)
    orders = [[p.label for p in plan_rounds(points, 2, seed, "s") if p.round["index"] == 2] for seed in (1, 2)]
    assert sorted(orders[0]) == sorted(orders[1]) and orders[0] != orders[1]


def test_resume_counts_rounds(tmp_path):
    plan = plan_rounds(_grid(), 3, seed=0, sweep_id="s")
    point = next(p for p in plan if p.label == "O0_default" and p.round["index"] == 2)
    record = {"label": "O0_default", "system": "graphbench", "status": "ok", "failure": None, "environment": {},
              "model": "tiny-llama", "config": {}, "config_hash": "x", "startup": None, "startups": [],
              "workloads": [], "sweep": {"identity": {"a": 1}, "round": point.round}}
    write_result(tmp_path, "m", "O0_default", record)
    done = measured_identities(tmp_path)
    assert done == {("", "O0_default", 2): {"a": 1}}
    assert point.key in done and ("", "O0_default", 1) not in done


def _point_file(label, tokens, index, sweep_id):
    repeat = {"output_tokens_per_s": tokens, "tpot_ms": {"p50": 1000 / tokens, "p99": 1100 / tokens},
              "duration_s": 1.0}
    return {"label": label, "system": "graphbench", "status": "ok", "failure": None, "environment": {"device": "cpu"},
            "model": "tiny-llama", "config": {}, "config_hash": "h", "startup": {"total_s": 1.0},
            "startups": [{"total_s": 1.0, "cold": False}],
            "workloads": [{"name": "closed-c1", "repeats": [repeat, dict(repeat)], "summary": {}}],
            "sweep": {"round": {"id": sweep_id, "index": index, "of": 3, "seed": 0, "position": 1}}}


def test_a_history_baseline_judges_one_run_against_the_spread_of_many(tmp_path):
    rng = random.Random(0)
    history = tmp_path / "history"
    for run in range(4):  # four runs of 3 rounds, each run drifting by up to 6%
        drift = 1.0 + 0.02 * run
        for index in (1, 2, 3):
            write_result(history, "m", "P", _point_file("P", 1000 * drift * (1 + rng.uniform(-0.005, 0.005)), index, f"run{run}"))
    same, slow = tmp_path / "same", tmp_path / "slow"
    for index in (1, 2, 3):
        write_result(same, "m", "P", _point_file("P", 1030 * (1 + rng.uniform(-0.005, 0.005)), index, "new"))
        write_result(slow, "m", "P", _point_file("P", 700 * (1 + rng.uniform(-0.005, 0.005)), index, "old"))
    thresholds = {"output_tokens_per_s": -5}
    assert run_gate(history, same, thresholds).exit_code == 0  # inside the history's drift
    report = run_gate(history, slow, thresholds)
    assert report.exit_code == 1
    check = report.regressions[0].comparison
    assert check.n_baseline == 12 and check.n_current == 3 and check.noise_pct > 10  # the drift is the noise


def test_sweep_aa_runs_the_grid_twice_and_counts_false_alarms(tmp_path):
    out = tmp_path / "r"
    result = CliRunner().invoke(app, ["sweep", "--device", "cpu", "--levels", "0", "--ladders", "default",
                                      "--concurrency", "1", "--output-len", "4", "--prompt-len", "8",
                                      "--repeats", "1", "--rounds", "3", "--aa", "--results", str(out),
                                      "--order-seed", "3"])
    assert result.exit_code == 0, result.output
    assert "A/A:" in result.output
    check = json.loads((out / "aa.json").read_text())
    assert check["comparisons"] > 0 and check["gate_checks"] > 0
    assert check["false_alarms"] == len(check["alarms"])  # one line per alarm, none hidden
    files = sorted((out / "a").rglob("*.json")) + sorted((out / "b").rglob("*.json"))
    rounds = sorted(json.loads(f.read_text())["sweep"]["round"]["index"] for f in files)
    assert rounds == [1, 1, 2, 2, 3, 3]


def test_grid_axes_conflicts_and_size_are_refused_before_anything_runs():
    from graphbench.bench.sweep_options import MAX_POINTS, SweepRequest, plan_sweep
    from graphbench.errors import GraphbenchError
    import pytest

    def plan(**options):
        return plan_sweep(SweepRequest(device="cpu", **options))

    with pytest.raises(GraphbenchError, match="twice"):
        plan(grid=["max_num_seqs=8", "max_num_seqs=16"])
    with pytest.raises(GraphbenchError, match="both set one axis"):
        plan(levels="1", grid=["optimization_level=2"])
    only_two = plan(grid=["optimization_level=2"])  # replaces the default --levels
    assert {p.overrides.get("optimization_level") for p in only_two.points} == {2}
    values = ",".join(str(v) for v in range(1, 11))
    with pytest.raises(GraphbenchError, match=f"more than {MAX_POINTS} points"):
        plan(grid=[f"max_num_seqs={values}", f"block_size={values}", f"max_num_batched_tokens={values}"])


def test_an_empty_results_folder_or_grid_value_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    for args in (["sweep", "--device", "cpu", "--results", ""], ["run", "--device", "cpu", "--results", "."],
                 ["sweep", "--device", "cpu", "-g", "max_num_seqs=", "--dry-run"],
                 ["run", "--device", "cpu", "--request-rate", "1e-300", "--results", "r"],
                 ["run", "--device", "cpu", "--results", "loop"]):  # a link to itself: "Symlink loop"
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "error:" in result.output and "Traceback" not in result.output, (args, result.output)
    assert list(tmp_path.iterdir()) == [loop]  # nothing written into the current folder


def test_the_default_rounds_follow_the_device_and_an_explicit_count_wins(monkeypatch):
    from graphbench.bench import sweep_options
    from graphbench.bench.sweep_options import SweepRequest, plan_sweep
    from graphbench.errors import GraphbenchError
    import pytest

    def processes(plan) -> int:  # a graphbench point's rounds (same-engine labels and peers run once)
        labels = [p.label for p in plan.planned if p.system == "graphbench" and p.same_as is None]
        return max(labels.count(label) for label in labels)

    cpu = plan_sweep(SweepRequest(device="cpu", peers="none"))
    assert cpu.rounds == processes(cpu) == sweep_options.CPU_ROUNDS == 5
    monkeypatch.setattr(sweep_options, "_has_gpu", lambda device: True)  # planning a GPU's sweep needs no GPU
    gpu = plan_sweep(SweepRequest(device="cuda", peers="none"))
    assert gpu.gpu and gpu.rounds == processes(gpu) == sweep_options.GPU_ROUNDS == 3
    for device in ("cpu", "cuda"):
        assert plan_sweep(SweepRequest(device=device, peers="none", rounds=4)).rounds == 4
    with pytest.raises(GraphbenchError, match="--rounds must be in 1"):
        plan_sweep(SweepRequest(device="cuda", peers="none", rounds=0))
