"""Capture on demand planned from traffic (ladders/startup_plan.py; `tune --startup-coverage`): the rungs
start-up records, exact values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.startup_plan import startup_plan
from tests.test_tune_engine_limits import folder
from tests.test_tune_phases import DECODE, MIXED, _phased

runner = CliRunner()
# rung 1 replays 10 steps, rung 4 (steps of 3) 5, rung 8 (steps of 5) 2; 3 steps of 9 are above the top
STEPS = {1: 10, 3: 5, 5: 2, 9: 3}


def test_the_fewest_rungs_that_replay_the_asked_share():
    plan = startup_plan([1, 2, 4, 8], STEPS, 0.8)  # 80% of the 17 replayed steps: 13.6 -> rungs 1 and 4 (15)
    assert (plan.sizes, plan.deferred, plan.unused) == ((1, 4), (8,), (2,))
    assert (plan.covered_pct, plan.deferred_pct, plan.eager_pct) == pytest.approx((75.0, 10.0, 15.0))
    every = startup_plan([1, 2, 4, 8], STEPS, 1.0)
    assert (every.sizes, every.deferred, every.covered_pct) == ((1, 4, 8), (), pytest.approx(85.0))
    assert every.flag() == "--startup-capture-sizes 1,4,8"


def test_ties_go_to_the_smaller_rung_and_an_all_eager_traffic_records_nothing():
    assert startup_plan([1, 2], {1: 1, 2: 1}, 0.5).sizes == (1,)
    above = startup_plan([1, 2], {5: 3}, 0.9)
    assert (above.sizes, above.unused, above.eager_pct) == ((), (1, 2), 100.0)


@pytest.mark.parametrize("coverage", [0, 1.5, -0.1, True, "0.9"])
def test_a_coverage_outside_0_1_is_refused(coverage):
    with pytest.raises(GraphbenchError, match="startup-coverage"):
        startup_plan([1, 2], STEPS, coverage)


def test_no_steps_no_plan():
    with pytest.raises(GraphbenchError, match="no steps"):
        startup_plan([1, 2], {}, 0.9)


def test_tune_plans_each_ladders_start_up(tmp_path: Path):
    out = runner.invoke(app, ["tune", "--model", "closed:16", "--max-graphs", "8", "--startup-coverage", "0.95",
                              "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    # closed:16: 90% of the steps carry 16 requests, 10% spread over 1..15 (0.667% each)
    plans = doc["startup"]["plans"]
    assert doc["tuned"]["sizes"] == [2, 4, 6, 9, 11, 14, 16, 512]
    assert plans["tuned"]["sizes"] == [2, 9, 14, 16] and plans["tuned"]["unused"] == [512]
    assert plans["default"]["sizes"] == [8, 16] and plans["tuned"]["covered_pct"] == pytest.approx(96.0)
    assert doc["apply"]["graphbench"] == "--capture-sizes 2,4,6,9,11,14,16,512 --startup-capture-sizes 2,9,14,16"
    table = runner.invoke(app, ["tune", "--model", "closed:16", "--max-graphs", "8", "--startup-coverage", "0.95"])
    assert "capture on demand: start-up records the fewest rungs that replay 95% of the replayed steps" in table.stdout
    refused = runner.invoke(app, ["tune", "--model", "closed:16", "--max-graphs", "8", "--startup-coverage", "0.95",
                                  "--emit", "sglang"])
    assert refused.exit_code == 2 and "no server takes" in refused.output
    assert runner.invoke(app, ["tune", "--model", "closed:16", "--max-graphs", "8", "--startup-coverage", "2"]).exit_code == 2


def test_both_phases_plans_joined(tmp_path: Path):
    results = folder(tmp_path, _phased("p", DECODE, MIXED, seqs=32))
    out = runner.invoke(app, ["tune", "--from", str(results), "--phase", "both", "--max-graphs", "3",
                              "--startup-coverage", "0.7"])
    assert out.exit_code == 0, out.output
    # decode, tuned 3,16,32: rung 16 replays 20 of the 40 decode steps, rung 3 16 more (90% >= 70%); mixed:
    # rung 300 replays 8 of the 11 mixed steps (73%)
    assert out.stdout.strip().splitlines()[-1] == \
        "  graphbench: --capture-sizes 3,16,32 --mixed-ladder 300,700,1500 --startup-capture-sizes 3,16,300"


def test_traffic_that_replays_no_graph_plans_none_at_start_up(tmp_path: Path):
    steps = tmp_path / "steps.json"
    steps.write_text(json.dumps({"600": 10, "700": 5}))  # every step above the default ladder's top (512)
    out = runner.invoke(app, ["tune", "--distribution", str(steps), "--max-graphs", "4", "--startup-coverage", "0.9",
                              "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["startup"]["plans"]["tuned"]["sizes"] == [] and doc["startup"]["plans"]["tuned"]["eager_pct"] == 100.0
    assert doc["apply"]["graphbench"].endswith("--startup-capture-sizes none")


def test_the_joined_plan_says_which_sizes_record_both_phases_keys():
    from types import SimpleNamespace

    from graphbench.cli.tune import _print_joined_plan

    def phase(sizes, chosen):
        return SimpleNamespace(tuned=SimpleNamespace(sizes=sizes), doc={"startup": {"plans": {"tuned": {"sizes": chosen}}}})

    # decode chose 8, a rung of the mixed ladder the mixed plan left for first use
    from contextlib import redirect_stdout
    from io import StringIO

    buffer = StringIO()
    with redirect_stdout(buffer):
        _print_joined_plan(phase((1, 8, 16), [8]), phase((8, 64, 512), [64]))
    lines = buffer.getvalue().strip().splitlines()
    assert lines[-2] == "  graphbench: --capture-sizes 1,8,16 --mixed-ladder 8,64,512 --startup-capture-sizes 8,64"
    assert lines[-1].startswith("  (sizes 8 are rungs of both ladders")
