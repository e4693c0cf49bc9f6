"""graphbench report: summary.csv, headline table, charts, md and self-contained html.

Generic checks run on every fixture folder under tests/data/report/ (the synthetic one, and any
real-run folder added later) against an independent reference computed straight from the JSON.
Exact-number checks use tests/data/report/synthetic (see its make_fixtures.py for the curves).
"""

from __future__ import annotations

import csv
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import graphbench
from graphbench.errors import GraphbenchError
from graphbench.reports.figures import PNG_SIGNATURE, png_text
from graphbench.reports.charts_padding import ladders, measured_steps
from graphbench.reports.frame import metric_median, results_frame
from graphbench.reports.report import REPORT_HTML, REPORT_MD, SUMMARY_CSV, write_report
from graphbench.reports.store import load_results

DATA = Path(__file__).parent / "data" / "report"
SYNTHETIC = DATA / "synthetic"
FIXTURES = sorted(p for p in DATA.iterdir() if p.is_dir() and any(p.rglob("*.json")))
CHARTS = ["throughput.png", "speedup.png", "latency.png", "startup.png", "graph_memory.png", "padding.png"]
NESTED = {f"{b}_{s}_ms": (f"{b}_ms", s) for b in ("ttft", "tpot", "itl", "e2e", "step") for s in ("p50", "p99")}
MIB = 2**20


# ---------------------------------------------------------------- independent reference from the JSON


def ref_median(workload: dict, metric: str) -> float | None:
    """Median over repeats: the recorded summary median, else recomputed from the repeats."""
    recorded = (workload.get("summary") or {}).get(metric)
    if recorded is not None:
        return recorded["median"]
    values = []
    for rep in workload["repeats"]:
        if metric in NESTED:
            field, stat = NESTED[metric]
            value = (rep.get(field) or {}).get(stat)
        elif metric == "requests_per_s" and "requests_per_s" not in rep:
            value = workload["num_requests"] / rep["duration_s"]
        else:
            value = rep.get(metric)
        if isinstance(value, (int, float)) and not math.isnan(value):
            values.append(value)
    return statistics.median(values) if values else None


def ref_rows(results: list[dict]) -> list[dict]:
    """Expected summary.csv rows: every ok point x workload (one empty-workload row without workloads)."""
    rows = []
    for r in results:
        if r.get("status") != "ok":
            continue
        for w in r.get("workloads") or [None]:
            row = {"label": r["label"], "system": r["system"], "startup_s": (r.get("startup") or {}).get("total_s"),
                   "workload": "" if w is None else w["name"]}  # fmt: skip
            if w is not None:
                row["concurrency"] = w["concurrency"]
                for m in ("output_tokens_per_s", "total_tokens_per_s", "tpot_p99_ms", "ttft_p99_ms",
                          "tpot_p50_ms", "ttft_p50_ms", "padding_waste_pct", "eager_fraction", "requests_per_s"):
                    row[m] = ref_median(w, m)
            rows.append(row)
    return rows


def ref_best(results: list[dict]) -> dict[tuple, tuple[str, float]]:
    """(prompt, output, concurrency) -> (best graphbench label, its median output tokens/s)."""
    per: dict[tuple, dict[str, list[float]]] = {}
    for r in results:
        if r.get("status") != "ok" or r["system"] != "graphbench":
            continue
        for w in r["workloads"]:
            if w.get("concurrency") is None:
                continue
            key = (json.dumps(w["prompt_len"], sort_keys=True), json.dumps(w["output_len"], sort_keys=True),
                   float(w["concurrency"]))  # fmt: skip
            per.setdefault(key, {}).setdefault(r["label"], []).append(ref_median(w, "output_tokens_per_s"))
    best = {}
    for key, by_label in per.items():
        medians = {label: statistics.median(v) for label, v in by_label.items()}
        top = max(medians.values())
        best[key] = (min(lbl for lbl, v in medians.items() if v == top), top)
    return best


def num(text: str) -> float | None:
    return None if text == "" else float(text)


# ---------------------------------------------------------------- reports on every fixture folder


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """One report per fixture folder, built once for the module."""
    cache = {}

    def get(folder: Path):
        if folder not in cache:
            out = tmp_path_factory.mktemp(f"report-{folder.name}")
            seen = []
            report = write_report([folder], out, progress=lambda i, n, o: seen.append((i, n, o.name)))
            cache[folder] = (folder, out, report, seen, load_results([folder]))
        return cache[folder]

    return get


@pytest.fixture(params=FIXTURES, ids=[p.name for p in FIXTURES])
def built(request, reports):
    return reports(request.param)


def test_all_files_written_and_charts_are_pngs(built):
    _, out, report, seen, _ = built
    for name in (REPORT_MD, REPORT_HTML, SUMMARY_CSV):
        assert (out / name).stat().st_size > 0
    assert [s[2] for s in seen] == CHARTS and [s[:2] for s in seen] == [(i, 6) for i in range(1, 7)]
    for chart in report.charts:
        if chart.written:
            data = chart.path.read_bytes()
            assert data[:8] == PNG_SIGNATURE and len(data) > 10_000, chart.name
        else:
            assert chart.note.startswith("skipped: ") and not (out / chart.name).exists()
    assert set(report.files) >= {out / REPORT_MD, out / REPORT_HTML, out / SUMMARY_CSV}


def test_html_is_self_contained_with_every_chart_embedded(built):
    _, out, report, _, _ = built
    page = (out / REPORT_HTML).read_text()
    written = [c for c in report.charts if c.written]
    assert page.count('<img src="data:image/png;base64,') == len(written)
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", page)
    assert "<link" not in page and "<script" not in page and "<style>" in page
    for chart in report.charts:
        assert chart.title in page
        if not chart.written:
            assert chart.note in page
    assert page.index("Headline") < page.index("Charts") < page.index("Failures")


def test_markdown_links_every_chart_and_notes_skipped_ones(built):
    _, out, report, _, _ = built
    md = (out / REPORT_MD).read_text()
    for chart in report.charts:
        assert (f"]({chart.name})" in md) == chart.written
        if not chart.written:
            assert chart.note in md
    assert md.index("## Headline") < md.index("## Charts") < md.index("## Failures")


def test_summary_csv_matches_the_json(built):
    _, out, _, _, loaded = built
    with open(out / SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    expected = ref_rows(loaded.results)
    assert len(rows) == len(expected)
    for row, ref in zip(rows, expected):
        assert (row["label"], row["system"], row["workload"]) == (ref["label"], ref["system"], ref["workload"])
        for key, value in ref.items():
            if key in ("label", "system", "workload"):
                continue
            got = num(row[key])
            assert (got is None) == (value is None), (key, row)
            if value is not None:
                assert got == pytest.approx(value, rel=1e-12), (key, row["label"], row["workload"])


def test_failures_and_skipped_files_are_listed(built):
    _, out, report, _, loaded = built
    md, page = (out / REPORT_MD).read_text(), (out / REPORT_HTML).read_text()
    failed = [r for r in loaded.results if r.get("status") != "ok"]
    assert len(report.failures) == len(failed)
    for r in failed:
        assert f"### {r['label']} ({r['system']})" in md and r["failure"]["reason"] in md
        assert r["failure"]["reason"] in page
        tail = (r["failure"].get("stderr_tail") or "").strip().splitlines()
        assert not tail or tail[-1] in md
    skipped = [f"skipped {file}: {why}" for file, why in loaded.skipped]
    assert report.warnings[:len(skipped)] == skipped
    assert all(w.startswith("point ") and "results (" in w for w in report.warnings[len(skipped):])  # re-run points
    for file, _why in loaded.skipped:
        assert str(file) in md


def test_headline_is_the_best_graphbench_configuration(built):
    _, _, report, _, loaded = built
    best = ref_best(loaded.results)
    got = {(r.concurrency, r.best.split(" [")[0], r.output_tokens_per_s) for r in report.headline.itertuples()
           if r.best}  # fmt: skip
    assert got == {(key[2], label, tps) for key, (label, tps) in best.items()}


def test_figures_state_gpu_and_versions(built):
    _, out, report, _, loaded = built
    ok = [r for r in loaded.results if r.get("status") == "ok"]
    facts = {str(r["environment"][k]) for r in ok for k in ("gpu", "torch", "graphbench")
             if (r.get("environment") or {}).get(k)}  # fmt: skip
    assert facts
    md = (out / REPORT_MD).read_text()
    for chart in report.charts:
        if chart.written:
            footnote = png_text(chart.path)["Description"]
            assert all(fact in footnote for fact in facts), (chart.name, footnote)
            assert all(fact in md for fact in facts)


# ---------------------------------------------------------------- exact numbers on the synthetic fixture


@pytest.fixture
def synthetic(reports):
    _, out, report, _, _ = reports(SYNTHETIC)
    return out, report


def test_synthetic_summary_values(synthetic):
    out, _ = synthetic
    with open(out / SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9 * 6 + 1  # 9 configurations x 6 concurrencies + the warm, start-up-only O3 point
    by = {(r["label"], r["workload"], r["startup_cold"]): r for r in rows}
    o2 = by[("O2-default", "closed-c16", "False")]  # the point's `startup` is its last (warm) start
    assert o2["system"] == "graphbench" and o2["model"] == "llama-3.2-1b" and o2["optimization_level"] == "2"
    assert (o2["cudagraph_mode_requested"], o2["cudagraph_mode_resolved"]) == ("FULL_AND_PIECEWISE",) * 2
    assert (o2["performance_mode"], o2["num_capture_sizes"], o2["concurrency"]) == ("default", "51", "16")
    assert float(o2["output_tokens_per_s"]) == 4000.0 and float(o2["total_tokens_per_s"]) == 12000.0
    assert float(o2["tpot_p99_ms"]) == 40.0 and float(o2["tpot_p50_ms"]) == 20.0
    assert float(o2["ttft_p99_ms"]) == 260.0 and float(o2["ttft_p50_ms"]) == 130.0
    assert float(o2["startup_s"]) == 7.0 and float(o2["startup_cold_s"]) == 27.0 and float(o2["startup_warm_s"]) == 7.0
    assert int(o2["graph_memory_bytes"]) == 300 * MIB
    assert float(o2["eager_fraction"]) == 0.015625  # 1 of 64 steps: a 2048-token prefill chunk above 512
    seqs = by[("O2-seqs64", "closed-c64", "True")]
    assert (seqs["cudagraph_mode_requested"], seqs["cudagraph_mode_resolved"]) == ("FULL", "FULL_AND_PIECEWISE")
    assert seqs["num_capture_sizes"] == "19" and float(seqs["tpot_p99_ms"]) == 100.0
    peer = by[("hf-eager", "closed-c1", "True")]
    assert peer["optimization_level"] == "" and peer["graph_memory_bytes"] == "" and float(peer["eager_fraction"]) == 1
    warm = by[("O3-default", "", "False")]
    assert float(warm["startup_s"]) == 8.0 and warm["concurrency"] == "" and warm["output_tokens_per_s"] == ""
    o0 = by[("O0", "closed-c8", "True")]
    assert float(o0["padding_waste_pct"]) == 0.0 and float(o0["eager_fraction"]) == 1.0 and o0["num_capture_sizes"] == "0"


def test_synthetic_headline_rows(synthetic):
    _, report = synthetic
    rows = [(r.concurrency, r.best, r.output_tokens_per_s, r.startup_cold_s, r.startup_warm_s,
             r.graph_memory_bytes / MIB, r.best_peer, r.peer_output_tokens_per_s)
            for r in report.headline.itertuples()]  # fmt: skip
    o3 = [("O3-default", 300.0 * c, 47.0, 8.0, 310.0, "hf-compile", 120.0 * c) for c in (1, 4, 8, 16, 32)]
    expected = [(float(c), *row) for c, row in zip((1, 4, 8, 16, 32), o3)]
    assert rows[:5] == expected
    last = rows[5]
    assert last[:3] == (64.0, "O2-tp2", 17920.0) and last[3] == 28.0 and math.isnan(last[4])
    assert last[5:] == (300.0, "hf-compile", 7680.0)
    assert list(report.headline["speedup_vs_peer"]) == [2.5] * 5 + [17920.0 / 7680.0]
    md = (synthetic[0] / REPORT_MD).read_text()
    assert "| 64 | O2-tp2 | 17,920.0 | 28.0 | - | 300.0 | hf-compile | 7,680.0 | 2.33x |" in md
    assert md.index("## Headline") < md.index("## Charts")


def test_synthetic_writes_every_chart(synthetic):
    out, report = synthetic
    assert [c.name for c in report.charts if c.written] == CHARTS
    assert "O2-FULL-oom" in (out / REPORT_MD).read_text() and "torch.OutOfMemoryError" in (out / REPORT_HTML).read_text()
    assert "10 points ok, 1 failed; 2 malformed files skipped" in (out / REPORT_MD).read_text()


# ---------------------------------------------------------------- charts without data, errors, helpers


def _copy(results: list[dict], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(results, start=1):
        data = {k: v for k, v in r.items() if k != "_path"}
        (folder / f"{i:04d}_{r['label']}.json").write_text(json.dumps(data))
    return folder


def test_charts_without_data_are_skipped_with_a_note(tmp_path, capsys):
    loaded = load_results([SYNTHETIC])
    keep = [r for r in loaded.results if r["label"] in ("hf-eager", "O2-FULL-oom")]
    report = write_report([_copy(keep, tmp_path / "in")], tmp_path / "out")
    written = {c.name for c in report.charts if c.written}
    assert written == {"throughput.png", "latency.png", "startup.png"}
    notes = {c.name: c.note for c in report.charts if not c.written}
    assert notes["speedup.png"].startswith("skipped: needs a -O0 or peer baseline")
    assert "CUDA-graph ladder" in notes["padding.png"] and "captured CUDA graphs" in notes["graph_memory.png"]
    md = (tmp_path / "out" / REPORT_MD).read_text()
    assert all(note in md for note in notes.values())
    headline = report.headline
    assert list(headline["best"]) == [""] * 6 and list(headline["best_peer"]) == ["hf-eager"] * 6
    assert capsys.readouterr() == ("", "")  # the library never prints


def test_only_failed_points_still_make_a_report(tmp_path):
    loaded = load_results([SYNTHETIC])
    failed = [r for r in loaded.results if r["status"] == "failed"]
    report = write_report([_copy(failed, tmp_path / "in")], tmp_path / "out")
    assert not any(c.written for c in report.charts) and report.headline.empty
    assert "O2-FULL-oom" in (tmp_path / "out" / REPORT_HTML).read_text()
    assert (tmp_path / "out" / SUMMARY_CSV).read_text().startswith("label,system,model,")


def test_errors(tmp_path):
    with pytest.raises(GraphbenchError, match="no such result file or folder"):
        write_report([tmp_path / "missing"], tmp_path / "out")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.json").write_text("{")
    with pytest.raises(GraphbenchError, match=r"no graphbench result files found in .*bad \(1 malformed files skipped; the first, .*x\.json: "):
        write_report([bad], tmp_path / "out")
    empty = tmp_path / "empty"  # the folder is named: the user may have given the wrong one
    empty.mkdir()
    with pytest.raises(GraphbenchError, match=rf"^no graphbench result files found in {empty}$"):
        write_report([empty], tmp_path / "out")
    (tmp_path / "file").write_text("")
    with pytest.raises(GraphbenchError, match="not a folder"):
        write_report([SYNTHETIC], tmp_path / "file")
    with pytest.raises(GraphbenchError, match="at least one"):
        write_report([], tmp_path / "out")


def test_metric_median_falls_back_to_the_repeats():
    w = {"num_requests": 8, "repeats": [
        {"output_tokens_per_s": 10.0, "duration_s": 2.0, "tpot_ms": {"p99": 5.0}},
        {"output_tokens_per_s": 30.0, "duration_s": 4.0, "tpot_ms": {"p99": 7.0}},
        {"output_tokens_per_s": 20.0, "duration_s": 1.0, "tpot_ms": {"p99": 9.0}}]}  # fmt: skip
    assert metric_median(w, "output_tokens_per_s") == 20.0
    assert metric_median(w, "tpot_p99_ms") == 7.0
    assert metric_median(w, "requests_per_s") == 4.0  # median of 8/2, 8/4, 8/1
    assert math.isnan(metric_median(w, "ttft_p99_ms"))
    w["summary"] = {"output_tokens_per_s": {"median": 99.0}}
    assert metric_median(w, "output_tokens_per_s") == 99.0


def test_series_carry_the_shape_when_results_mix_shapes():
    point = {"label": "a", "system": "graphbench", "status": "ok", "startup": {"total_s": 1.0}, "workloads": [
        {"name": "x", "kind": "closed", "concurrency": 1, "prompt_len": {"dist": "fixed", "value": 128},
         "output_len": {"dist": "uniform", "a": 8, "b": 16}, "repeats": [{"output_tokens_per_s": 1.0}]},
        {"name": "y", "kind": "closed", "concurrency": 1, "prompt_len": {"dist": "fixed", "value": 64},
         "output_len": {"dist": "fixed", "value": 32}, "repeats": [{"output_tokens_per_s": 2.0}]}]}  # fmt: skip
    frame = results_frame([point])
    assert list(frame["series"]) == ["a [in 128 / out uniform(a=8,b=16)]", "a [in 64 / out 32]"]


def test_padding_measured_steps_and_ladders():
    result = {"system": "graphbench", "config": {"compilation": {"performance_mode": "default"},
                                                 "scheduler": {"max_num_seqs": 4}},  # the rule's ladder: 1, 2, 4, 8
              "startup": {"capture_sizes": [1, 2, 4, 8], "cudagraph_mode": {"resolved": "FULL_AND_PIECEWISE"}},
              "workloads": [
                  {"kind": "closed", "concurrency": 4,
                   "repeats": [{"batch_size_histogram": {"3": 2, "4": 10, "132": 1}},
                               {"batch_size_histogram": {"4": 12}}]},
                  {"kind": "decode", "concurrency": None, "repeats": [{"batch_size_histogram": {"5": 3, "9": 1}}]}]}
    assert measured_steps(result) == {3: 2, 4: 22, 5: 3, 9: 1}  # 132 is a prefill step of the closed loop
    (ladder,) = ladders([result, dict(result, system="hf-eager")])
    assert ladder.sizes == (1, 2, 4, 8) and ladder.name == "default: 4 sizes, top 8"
    assert ladder.steps == {3: 2, 4: 22, 5: 3, 9: 1} and ladder.eager == {9}
    assert ladders([dict(result, config={"compilation": {"performance_mode": "default"}})])[0].name == "custom: 4 sizes, top 8"


def test_no_torch_import():
    code = ("import sys\nimport graphbench.reports.report, graphbench.reports.plan, graphbench.cli.main\n"
            "import graphbench.reports.charts_plan\nassert 'torch' not in sys.modules, 'torch imported'\n"
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported eagerly'\n")  # fmt: skip
    src = str(Path(graphbench.__file__).parents[1])
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          env={"PYTHONPATH": src})  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_ladder_table_from_the_h200_tune_results():
    """The H200's measured default vs tuned:25 ladders (benchmarks/RESULTS.md, 2026-11-29, abaddfd): sizes, costs
    and ratios."""
    from pathlib import Path

    from graphbench.reports.ladder_table import ladder_table
    from graphbench.reports.report import report_data
    from graphbench.reports.store import load_results

    folder = Path(__file__).resolve().parents[1] / "benchmarks/results/2026-11-29-tune-llama-3.2-1b-abaddfd"
    data = report_data(load_results([folder]).results)
    table = ladder_table(data.points, data.frame).set_index("ladder")
    default, tuned = table.loc["O2_default"], table.loc["O2_tuned25"]
    assert (default["sizes"], tuned["sizes"]) == (51, 25)
    assert (default["graph MiB"], default["beyond pool MiB"]) == (284.0, 208.0)
    assert (tuned["graph MiB"], tuned["beyond pool MiB"]) == (214.0, 138.0)
    assert tuned["sizes vs largest %"] == pytest.approx(100 * 25 / 51)
    assert tuned["beyond pool vs largest %"] == pytest.approx(100 * 138 / 208)
    # warm captures compare with warm captures (the tuned point has no cold start)
    assert tuned["capture vs largest %"] == pytest.approx(100 * tuned["capture s (warm)"] / default["capture s (warm)"])
    assert math.isnan(tuned["capture s (cold)"]) and default["capture s (cold)"] > default["capture s (warm)"]
    assert tuned["padding waste %"] < default["padding waste %"]


def test_points_measured_twice_are_named_with_their_runs():
    from graphbench.reports.report import load, skipped_warnings

    data = Path(__file__).parent / "data" / "report"
    warnings = skipped_warnings(load([data / "real-cpu-a", data / "real-cpu-b"]))
    assert warnings[0] == ("point O0_default (graphbench) has 2 results (2026-11-29T11:32:02Z, 2026-11-29T11:33:02Z): "
                           "their runs are pooled; give one run per point (a fresh --results folder, or --resume)")
    assert len(warnings) == 3
    assert skipped_warnings(load([data / "real-cpu-a"])) == []


def test_the_startup_breakdown_shows_the_kernel_choices_time():
    """A cold start's timing of graphbench's kernels is its own part of the startup chart (a start with a new
    entry may load them instead), read from files written before the field from kernel_choices."""
    from graphbench.reports.charts_startup import PART_NAMES, startup_rows
    from graphbench.reports.frame import points_frame

    def point(label: str, start: dict) -> dict:
        start = {"cold": True, "total_s": 40.0, "load_s": 1.0, **start}
        return {"label": label, "system": "graphbench", "status": "ok", "startup": start, "startups": [start],
                "workloads": []}

    rows = startup_rows(points_frame([
        point("timed", {"kernel_choices_s": 30.0, "kernel_choices": {"source": "measured", "seconds": 30.0}}),
        point("shared", {"kernel_choices_s": 0.01, "kernel_choices": {"source": "shared", "seconds": 0.01}}),
        point("older file", {"kernel_choices": {"source": "measured", "seconds": 25.0}})]))
    assert dict(zip(rows["label"], rows["kernel_choices_s"])) == {"timed": 30.0, "shared": 0.01, "older file": 25.0}
    assert dict(zip(rows["label"], rows["other_s"].round(2))) == {"timed": 9.0, "shared": 38.99, "older file": 14.0}
    assert PART_NAMES["kernel_choices_s"].startswith("kernel choices")


@pytest.mark.parametrize("missing", ["ttft", "tpot"])
def test_latency_chart_draws_what_was_measured(tmp_path, missing):
    """Server results may carry TPOT and no TTFT (or the reverse): the chart keeps the measured panel."""
    results = load_results([SYNTHETIC]).results
    for r in results:
        for w in r.get("workloads") or []:
            for rep in w.get("repeats") or []:
                rep.pop(f"{missing}_ms", None)
            for key in [k for k in w.get("summary") or {} if k.startswith(missing)]:
                w["summary"].pop(key)
    report = write_report([_copy(results, tmp_path / "in")], tmp_path / "out")
    latency = next(c for c in report.charts if c.name == "latency.png")
    assert latency.written, latency.note
    kept = "TPOT" if missing == "ttft" else "TTFT"
    assert png_text(tmp_path / "out" / "latency.png")["Title"] == f"{kept} p50 / p99 vs concurrency"


def test_the_first_capture_is_no_rungs_memory():
    """graph_setup_bytes (the capture stream's cuBLAS setup, counted in graph memory since 2026-12-06) is left
    out of the memory beyond the pool, which is what fewer rungs can save."""
    from pathlib import Path

    from graphbench.reports.ladder_table import ladder_table
    from graphbench.reports.report import report_data
    from graphbench.reports.store import load_results

    folder = Path(__file__).resolve().parents[1] / "benchmarks/results/2026-11-29-tune-llama-3.2-1b-abaddfd"
    results = load_results([folder]).results
    for result in results:
        for start in [result.get("startup") or {}, *(result.get("startups") or [])]:
            if start.get("graph_memory_bytes"):
                start["graph_memory_bytes"] += 70 * 2**20
                start["graph_setup_bytes"] = 70 * 2**20
    data = report_data(results)
    table = ladder_table(data.points, data.frame).set_index("ladder")
    assert (table.loc["O2_default", "graph MiB"], table.loc["O2_default", "beyond pool MiB"]) == (354.0, 208.0)
