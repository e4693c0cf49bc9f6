"""`tune --curve` given several processes' curves: their per-size medians weigh the ladders, and each ladder is
judged against the tuned one over the processes (ladders/step_curve.median_curve, tuning/tune_models)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.step_curve import StepCurve, median_curve, write_curve

META = {"model": "tiny", "optimization_level": 2, "context_tokens": 120, "environment": {"gpu": "NVIDIA H200"}}


def process_curves(tmp_path: Path, noise: float, count: int = 3, seed: int = 0) -> list[Path]:
    """count curves of one step time, 1 + n / 100 ms at n requests (1..64), each size moved by up to +-noise
    (a fraction) as a process's own measurement would move it."""
    rng, files = random.Random(seed), []
    for i in range(count):
        graph = {n: (1 + n / 100) * (1 + rng.uniform(-noise, noise)) for n in range(1, 65)}
        meta = dict(META, date=f"2026-12-07T00:0{i}:00Z")
        files.append(write_curve(tmp_path / f"curve-{seed}-{i}.json", StepCurve(graph, meta=meta)))
    return files


def tune(tmp_path: Path, curves: list[Path], *args: str) -> CliRunner:
    dist = tmp_path / "dist.json"
    dist.write_text(json.dumps({str(n): 1 for n in range(1, 65)}))  # uniform over 1..64
    flags = [a for c in curves for a in ("--curve", str(c))]
    return CliRunner().invoke(app, ["tune", "--distribution", str(dist), "--max-num-seqs", "64", "--top", "64",
                                    "--objective", "time", *flags, *args])


def test_the_median_of_each_size_over_the_processes() -> None:
    curves = [StepCurve({1: a, 2: b}, eager_ms={1: e}, meta=META) for a, b, e in ((1.0, 2.0, 5.0), (1.2, 1.9, 4.0),
                                                                                   (1.1, 2.6, 6.0))]
    merged = median_curve(curves, ["a", "b", "c"])
    assert merged.graph_ms == {1: 1.1, 2: 2.0} and merged.eager_ms == {1: 5.0}
    assert merged.meta["processes"] == 3 and merged.meta["model"] == "tiny"


def test_curves_of_other_measurements_or_one_process_twice_are_refused() -> None:
    a = StepCurve({1: 1.0, 2: 2.0}, meta=META)
    other_gpu = StepCurve({1: 1.1, 2: 2.1}, meta=dict(META, environment={"gpu": "NVIDIA A100"}))
    with pytest.raises(GraphbenchError, match="not one measurement repeated: a has GPU 'NVIDIA H200', b 'NVIDIA A100'"):
        median_curve([a, other_gpu], ["a", "b"])
    with pytest.raises(GraphbenchError, match="-O level 2, b 3"):
        median_curve([a, StepCurve({1: 1.1, 2: 2.1}, meta=dict(META, optimization_level=3))], ["a", "b"])
    # a curve that does not say its model counts as the others', which must still agree among themselves
    silent = StepCurve({1: 0.9, 2: 2.2}, meta={})
    with pytest.raises(GraphbenchError, match="b has model 'tiny', c 'big'"):
        median_curve([silent, a, StepCurve({1: 1.1, 2: 2.1}, meta=dict(META, model="big"))], ["s", "b", "c"])
    # other sizes timed: another --max-size or --eager-every, not the same measurement
    with pytest.raises(GraphbenchError, match=r"a has recordings at 2 sizes \(1..2\), s at 1 \(1..1\)"):
        median_curve([a, StepCurve({1: 1.1}, meta=META)], ["a", "s"])
    with pytest.raises(GraphbenchError, match=r"eager times \(--eager-every\) at 0 sizes \(no sizes\), e at 1 "
                                              r"\(1..1\); 1 size\(s\) in one only, the first 1"):
        median_curve([a, StepCurve({1: 1.1, 2: 2.1}, eager_ms={1: 3.0}, meta=META)], ["a", "e"])
    with pytest.raises(GraphbenchError, match="capture memory readings at 0 sizes"):
        median_curve([a, StepCurve({1: 1.1, 2: 2.1}, capture_bytes={1: 2}, meta=META)], ["a", "m"])
    # what the merged curve says of itself: any curve's model and GPU where the first says none
    said = median_curve([silent, a, StepCurve({1: 1.1, 2: 2.1}, meta=META)], ["s", "a", "c"])
    assert said.meta["model"] == "tiny" and said.meta["environment"] == {"gpu": "NVIDIA H200"}
    # a copy, whole or changed at a size or two: one process counted twice
    big = StepCurve({n: 1 + n / 10 for n in range(1, 11)}, meta=META)
    edited = StepCurve({**big.graph_ms, 10: 9.0}, meta=META)
    with pytest.raises(GraphbenchError, match="b holds the same times as a at 9 of 10 sizes: one process given twice"):
        median_curve([big, edited], ["a", "b"])


def test_a_difference_within_the_processes_noise_is_a_tie(tmp_path: Path) -> None:
    # A/A: the default ladder and the tuned one step within a percent of each other on this traffic; three
    # processes' curves, each size moved by up to 2%: no ladder is called slower or faster
    result = tune(tmp_path, process_curves(tmp_path, noise=0.02), "--max-graphs", "11", "--format", "json")
    assert result.exit_code == 0, result.output
    curve = json.loads(result.stdout)["curve"]
    assert curve["processes"] == 3 and len(curve["files"]) == 3
    assert {v["verdict"] for v in curve["vs_tuned"].values()} == {"tie"}


def test_a_real_difference_beyond_the_noise_is_called(tmp_path: Path) -> None:
    # A/B: one graph (64: every batch padded to it, 1.64 ms) against the default ladder (~1.37 ms), three
    # processes' curves moved by up to 2%: the default ladder is called faster, the table says so
    curves = process_curves(tmp_path, noise=0.02)
    result = tune(tmp_path, curves, "--max-graphs", "1", "--format", "json")
    assert result.exit_code == 0, result.output
    default = json.loads(result.stdout)["curve"]["vs_tuned"]["default"]
    assert default["verdict"] == "improved" and default["change_pct"] < -10
    table = tune(tmp_path, curves, "--max-graphs", "1")
    assert table.exit_code == 0, table.output
    assert "vs tuned" in table.stdout and "default against tuned, each process's ratio of ms per step (" in table.stdout
    assert "%): faster, " in table.stdout
    # the same gap in processes that move by up to 40%: beyond what the noise lets one call
    noisy = tune(tmp_path, process_curves(tmp_path, noise=0.4, seed=1), "--max-graphs", "1", "--format", "json")
    assert json.loads(noisy.stdout)["curve"]["vs_tuned"]["default"]["verdict"] == "tie"


def test_one_curve_gives_figures_not_verdicts(tmp_path: Path) -> None:
    (one,) = process_curves(tmp_path, noise=0.02, count=1)
    result = tune(tmp_path, [one], "--max-graphs", "1")
    assert result.exit_code == 0, result.output
    assert "figures, not verdicts" in result.stdout and "vs tuned" not in result.stdout
    doc = json.loads(tune(tmp_path, [one], "--max-graphs", "1", "--format", "json").stdout)
    assert doc["curve"]["processes"] == 1 and doc["curve"]["vs_tuned"] == {}


def test_a_gap_every_process_shows_is_called_though_the_processes_differ_in_speed(tmp_path: Path) -> None:
    # one process 3% and one 6% slower all over: each ladder's ratio to the tuned one is the same in every
    # process, so the gap (the default ladder ~17% faster than one graph of 64) is called, not lost in the offset
    base = {n: 1 + n / 100 for n in range(1, 65)}
    files = [write_curve(tmp_path / f"clock-{i}.json", StepCurve({n: t * scale for n, t in base.items()}, meta=META))
             for i, scale in enumerate((1.0, 1.03, 1.06))]
    doc = json.loads(tune(tmp_path, files, "--max-graphs", "1", "--format", "json").stdout)
    default = doc["curve"]["vs_tuned"]["default"]
    assert default["verdict"] == "improved" and default["per_process_pct"] == pytest.approx([default["change_pct"]] * 3)


def test_one_file_given_twice_is_refused_by_name(tmp_path: Path) -> None:
    first, second, _ = process_curves(tmp_path, noise=0.02)
    result = tune(tmp_path, [first, second, tmp_path / "sub" / ".." / first.name])
    assert result.exit_code == 2 and f"is {first} given again" in result.output
    twice = tune(tmp_path, [first, second, first])
    assert twice.exit_code == 2 and f"--curve {first} is given twice" in twice.output


def test_a_symlink_loop_as_a_curve_is_one_error_line(tmp_path: Path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)  # (the fuzz suite's hostile file: Path.resolve raised RuntimeError, a traceback)
    result = tune(tmp_path, [loop, loop])
    assert result.exit_code == 2 and result.exc_info[0] is SystemExit and "given twice" in result.output
    single = tune(tmp_path, [loop])
    assert single.exit_code == 2 and f"{loop}: not a file" in single.output
