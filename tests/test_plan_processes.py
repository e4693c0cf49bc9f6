"""The capacity plan over processes (reports/plan_processes.py): an A/A pair of configurations is a tie, a
configuration 30% slower is called beyond the noise, and too few processes say so."""

from __future__ import annotations

import random

from graphbench.reports.plan import parse_slos, plan_capacity
from tests.test_gate import make_result, with_round, write_set

CONCURRENCIES = (1, 4, 16)
SLOS = parse_slos(["tpot_p99_ms=30"])


def _rounds(label: str, rng: random.Random, speed: float, rounds: int = 3) -> list[dict]:
    """One point's round files: tokens/s 500 x C^0.8 and TPOT p99 10 x C^0.4 ms (the SLO crossed between
    C = 4 and 16), both scaled by speed, each within +-1% per repeat."""
    def jitter(x: float) -> float:
        return x * (1.0 + rng.uniform(-0.01, 0.01))

    files = []
    for index in range(1, rounds + 1):
        repeats = {f"closed-c{c}": [(jitter(500.0 * c**0.8 * speed), jitter(10.0 * c**0.4 / speed)) for _ in range(2)]
                   for c in CONCURRENCIES}
        files.append(with_round(make_result(label, repeats=repeats, config_hash=label), index, rounds, "s1"))
    return files


def test_an_equal_pair_is_a_tie_and_a_slower_configuration_is_called(tmp_path):
    rng = random.Random(20261206)
    files = _rounds("O2-a", rng, 1.0) + _rounds("O2-b", rng, 1.0) + _rounds("O2-slow", rng, 0.7)
    plan = plan_capacity([write_set(tmp_path / "results", files)], SLOS)
    by_name = {c.series: c for c in plan.capacities}
    assert [c.series for c in plan.capacities][2] == "O2-slow"
    first, second = plan.capacities[0], plan.capacities[1]
    assert {first.series, second.series} == {"O2-a", "O2-b"}
    assert len(first.process_output_tokens_per_s_per_gpu) == 3
    # each process's capacity lies near the pooled one
    for value in first.process_output_tokens_per_s_per_gpu:
        assert abs(value / first.output_tokens_per_s_per_gpu - 1) < 0.05
    assert first.vs_best == "best"
    assert second.vs_best.startswith("tie ("), second.vs_best  # A/A: no difference called
    slow = by_name["O2-slow"]
    assert slow.vs_best.endswith("% lower, beyond noise"), slow.vs_best


def test_one_process_a_side_gets_no_verdict(tmp_path):
    rng = random.Random(7)
    files = _rounds("O2-a", rng, 1.0, rounds=1) + _rounds("O2-slow", rng, 0.7, rounds=1)
    plan = plan_capacity([write_set(tmp_path / "results", files)], SLOS)
    assert [c.vs_best for c in plan.capacities] == ["best", "n/a (1 vs 1 processes)"]


def test_the_speedup_chart_tells_a_tie_from_a_difference(tmp_path):
    """The report's speed-up bars are hatched where the gap is within the noise (reports/charts_perf.py)."""
    from graphbench.reports.charts_perf import beyond_noise
    from graphbench.reports.frame import results_frame
    from graphbench.reports.store import load_results

    rng = random.Random(11)
    files = _rounds("O2-a", rng, 1.0) + _rounds("O2-b", rng, 1.0) + _rounds("O2-slow", rng, 0.7)
    frame = results_frame(load_results([write_set(tmp_path / "results", files)]).results)
    assert not beyond_noise(frame, "O2-a", "O2-b", 4)
    assert beyond_noise(frame, "O2-a", "O2-slow", 4) and beyond_noise(frame, "O2-slow", "O2-a", 16)


def test_the_plan_files_carry_the_verdict_and_each_process(tmp_path):
    import csv
    import json

    from typer.testing import CliRunner

    from graphbench.cli.main import app

    rng = random.Random(5)
    folder = write_set(tmp_path / "results", _rounds("O2-a", rng, 1.0) + _rounds("O2-slow", rng, 0.7))
    out = CliRunner().invoke(app, ["plan", str(folder), "--slo", "tpot_p99_ms=30", "--format", "json",
                                   "-o", str(tmp_path / "plan")])
    assert out.exit_code == 0, out.output
    configs = {c["series"]: c for c in json.loads(out.stdout)["configurations"]}
    assert len(configs["O2-slow"]["process_output_tokens_per_s_per_gpu"]) == 3
    assert configs["O2-a"]["vs_best"] == "best" and configs["O2-slow"]["vs_best"].endswith("beyond noise")
    with open(tmp_path / "plan" / "plan.csv", newline="") as f:
        rows = {r["series"]: r for r in csv.DictReader(f)}
    assert rows["O2-slow"]["vs_best"] == configs["O2-slow"]["vs_best"]


def _on(gpu: str, files: list[dict]) -> list[dict]:
    """The round files as one machine's, of that GPU type (its own sweep)."""
    for f in files:
        f["environment"] = dict(f["environment"], device="cuda", gpu=gpu)
        f["sweep"]["round"]["id"] = gpu
    return files


def test_each_gpu_type_is_judged_against_its_own_first(tmp_path):
    # two machines' folders: the H200 (twice as fast) holds the plan's first row; the H100's best was judged
    # against it ("51.5% lower, beyond noise"), the hardware's gap, not a setting's
    rng = random.Random(3)
    files = (_on("NVIDIA H200", _rounds("O2-a", rng, 2.0) + _rounds("O2-slow", rng, 1.4))
             + _on("NVIDIA H100", _rounds("O2-a", rng, 1.0) + _rounds("O2-slow", rng, 0.7)))
    plan = plan_capacity([write_set(tmp_path / "results", files)], SLOS)
    verdicts = {c.series: c.vs_best for c in plan.capacities}
    assert verdicts["O2-a @ NVIDIA H200"] == "best" and verdicts["O2-a @ NVIDIA H100"] == "best"
    for gpu in ("NVIDIA H200", "NVIDIA H100"):  # slower than its own machine's O2-a
        assert verdicts[f"O2-slow @ {gpu}"].endswith("% lower, beyond noise"), verdicts
    assert {c.gpu for c in plan.capacities} == {"NVIDIA H200", "NVIDIA H100"}


def test_the_pareto_front_is_each_gpu_types_own(tmp_path):
    # one front over two machines kept only the H200's points (twice as fast): the H100's own trade-off was
    # not drawn, and a line joined points of two machines
    from graphbench.reports.charts_plan import pareto_points

    rng = random.Random(4)
    files = _on("NVIDIA H200", _rounds("O2-a", rng, 2.0)) + _on("NVIDIA H100", _rounds("O2-a", rng, 1.0))
    rows = pareto_points(plan_capacity([write_set(tmp_path / "results", files)], SLOS))
    assert set(rows.loc[rows["front"], "gpu"]) == {"NVIDIA H200", "NVIDIA H100"}
