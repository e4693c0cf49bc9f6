"""The report's padding in the open (table, ladder pairs, CPU chart), one engine measured once, busy hosts, the CPU banner.

The fixtures are a small CPU sweep written here by hand (what `graphbench sweep` writes on the CPU, with
`stands_for`, `busy_host` and `padding_token_pct`) and two GPU points that differ only in their ladder.
Expected numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from graphbench.reports.aliases import alias_ladder, alias_map, with_aliases
from graphbench.reports.banner import cpu_banner
from graphbench.reports.figures import png_text
from graphbench.reports.charts_padding import PREDICTED_ONLY, ladders
from graphbench.reports.frame import busy_repeats, metric_median
from graphbench.reports.ladder_pairs import PAIR_COLUMNS, ladder_pairs, pairs_note, same_recordings
from graphbench.reports.padding_table import histogram_text, padding_table
from graphbench.reports.report import REPORT_HTML, REPORT_MD, SUMMARY_CSV, write_report
from graphbench.reports.repeats_table import repeats_table, steadiness_note
from graphbench.reports.rounds import merge_rounds
from graphbench.reports.verdict import noise_floor

DEFAULT_4 = [1, 2, 4, 8]  # docs/MACHINERY.md §1.5 with max_num_seqs 4: top min(4 * 2, 512) = 8
INTERACTIVE_4 = [1, 2, 3, 4, 5, 6, 7, 8]
# Per repeat: 10 steps of 3 tokens, 20 of 4, 5 of 6 and one prefill of 40 (above the top: eager).
# Default ladder: 3 -> 4 and 6 -> 8 pad 10 + 10 tokens of 10*4 + 20*4 + 5*8 + 40 = 200: 10.0%.
# Interactivity ladder: every size up to 8 is a rung: 0.0%.
HIST = {"3": 10, "4": 20, "6": 5, "40": 1}
CPU_REASON = "CUDA graphs need a CUDA device; running on cpu"
SAME_REASON = "CUDA graphs need a GPU: on this device every cudagraph mode resolves to NONE"


def _repeat(tps: float, tpot: float, busy: str | None = None, token_pct: float = 0.0, hist: dict | None = None) -> dict:
    return {"output_tokens_per_s": tps, "duration_s": 100.0 / tps, "num_steps": 36,
            "tpot_ms": {"mean": tpot, "p50": tpot, "p90": tpot, "p99": tpot},
            "ttft_ms": {"mean": 9 * tpot, "p50": 9 * tpot, "p90": 9 * tpot, "p99": 9 * tpot}, "padding_waste_pct": token_pct,
            "padding_token_pct": token_pct, "padding_overhead": 0.0, "batch_size_histogram": dict(hist or HIST),
            "step_ms_by_mode": {"NONE": {"total_ms": 1e5 / tps, "n": 36}}, "slowest_steps": [], "busy_host": busy}


def _result(label: str, level: int, mode: str, ladder: list[int], repeats: list[dict], *, device: str = "cpu",
            requested: str = "FULL_AND_PIECEWISE", stands_for: list[str] | None = None) -> dict:
    recorded = device == "cuda" and requested != "NONE"
    start = {"cold": False, "total_s": 2.0, "capture_s": 1.5 if recorded else 0.0,
             "graph_memory_bytes": 96 * 2**20 if recorded else 0, "capture_sizes": ladder if recorded else [],
             "cudagraph_mode": {"requested": requested, "resolved": requested if recorded else "NONE",
                                "reason": "" if recorded or requested == "NONE" else CPU_REASON}}
    busy = [i for i, r in enumerate(repeats) if r.get("busy_host")]
    return {
        "schema_version": 2, "kind": "graphbench-result", "label": label, "system": "graphbench", "status": "ok",
        "created_utc": "2026-12-01T10:00:00Z", "model": "tiny-llama",
        "environment": {"device": device, "graphbench": "0.1.0", "torch": "2.11.0",
                        "gpu": "NVIDIA H200" if device == "cuda" else None},
        "config": {"optimization_level": level, "scheduler": {"max_num_seqs": 4, "max_num_batched_tokens": 2048},
                   "speculative": {"num_speculative_tokens": 0},
                   "compilation": {"cudagraph_mode": requested, "performance_mode": mode,
                                   "cudagraph_capture_sizes": ladder, "max_cudagraph_capture_size": ladder[-1]}},
        "startup": start, "startups": [dict(start, cold=True, total_s=20.0), start],
        "workloads": [{"name": "closed-c4", "kind": "closed", "concurrency": 4, "num_requests": 8,
                       "prompt_len": {"dist": "fixed", "value": 40}, "output_len": {"dist": "fixed", "value": 9},
                       "repeats": repeats, "busy_host_repeats": busy}],
        "stands_for": stands_for or [], "same_engine_reason": SAME_REASON if stands_for else "",
    }  # fmt: skip


def cpu_sweep() -> list[dict]:
    """-O0 (no ladder asked) standing for its interactivity point; -O1 standing for three points, its third
    repeat on a busy host."""
    o0 = _result("O0_default", 0, "default", DEFAULT_4, [_repeat(50.0, 8.0), _repeat(51.0, 8.0), _repeat(49.0, 8.0)],
                 requested="NONE", stands_for=["O0_interactivity"])
    o1 = _result("O1_default", 1, "default", DEFAULT_4,
                 [_repeat(100.0, 4.0), _repeat(102.0, 3.9), _repeat(60.0, 6.0, busy="host load 3.1 > 2 cores")],
                 stands_for=["O1_interactivity", "O2_default", "O2_interactivity"])
    return [o0, o1]


def _write(results: list[dict], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, r in enumerate(results, start=1):
        (folder / f"{i:04d}_{r['label']}.json").write_text(json.dumps(r))
    return folder


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cpu-report")
    report = write_report([_write(cpu_sweep(), tmp / "results")], tmp / "report")
    return tmp / "report", report


# ---------------------------------------------------------------- the padding table


def test_padding_table_on_the_cpu_predicts_each_label_s_ladder():
    table = padding_table(cpu_sweep()).set_index("point")
    assert list(table.index) == [
        "O0_default", "O0_interactivity = O0_default (same engine, measured once)", "O1_default",
        "O1_interactivity = O1_default (same engine, measured once)",
        "O2_default = O1_default (same engine, measured once)",
        "O2_interactivity = O1_default (same engine, measured once)"]  # fmt: skip
    o1 = table.loc["O1_default"]
    assert (o1["ladder"], o1["graphs"]) == ("default: 4 sizes, top 8", "none on cpu: predicted only")
    assert o1["paid padding %"] == 0.0 and o1["predicted padding %"] == pytest.approx(10.0, abs=1e-12)
    # 3 repeats: 30, 60, 15 and 3 steps of 108
    assert o1["batch sizes (share of steps)"] == "4: 56%, 3: 28%, 6: 14% +1 sizes (3-40, 108 steps)"
    assert math.isnan(o1["capture s"]) and math.isnan(o1["graph MiB"])  # no graph: nothing to cost
    inter = table.loc["O1_interactivity = O1_default (same engine, measured once)"]
    assert inter["ladder"] == "interactivity: 8 sizes, top 8" and inter["predicted padding %"] == 0.0
    same = table.loc["O2_default = O1_default (same engine, measured once)"]  # O1_default's own ladder: one pointer
    assert (same["workload"], same["ladder"]) == ("every workload: see O1_default", "default: 4 sizes, top 8")
    assert math.isnan(same["predicted padding %"]) and same["batch sizes (share of steps)"] == ""
    o0 = table.loc["O0_default"]
    assert (o0["ladder"], o0["graphs"], o0["paid padding %"]) == ("none", "none asked (mode NONE)", 0.0)
    assert math.isnan(o0["predicted padding %"])


def test_padding_table_where_graphs_were_recorded():
    gpu = _result("O2_default", 2, "default", DEFAULT_4, [_repeat(100.0, 2.0, token_pct=10.0)] * 2, device="cuda")
    (row,) = padding_table([gpu]).to_dict("records")
    assert row["graphs"] == "recorded (FULL_AND_PIECEWISE)"
    assert row["paid padding %"] == 10.0 and row["predicted padding %"] == pytest.approx(10.0)
    assert row["capture s"] == 1.5 and row["graph MiB"] == 96.0  # the warm start's capture


def test_paid_padding_of_older_results_comes_from_the_overhead():
    # sum(padded) / sum(real) - 1 = 0.25: 20 of 100 padded tokens were padding
    w = {"repeats": [{"padding_overhead": 0.25}, {"padding_overhead": 0.0}, {"padding_overhead": 1.0}]}
    assert metric_median(w, "padding_token_pct") == pytest.approx(20.0)


def test_histogram_text():
    assert histogram_text({16: 30, 1024: 2}) == "16: 94%, 1024: 6% (16-1024, 32 steps)"
    assert histogram_text({1: 1, 2: 300}) == "2: 100%, 1: <1% (1-2, 301 steps)"
    assert histogram_text({}) == ""


# ---------------------------------------------------------------- ladder pairs


def _processes(label: str, mode: str, ladder: list[int], tpots, tps, *, token_pct: float = 0.0,
               hist: dict | None = None, full_ms=None) -> list[dict]:
    """One GPU point measured in len(tpots) processes (a sweep's rounds): process i's two repeats both have
    TPOT p50 tpots[i], tokens/s tps[i] (and a replayed FULL step of full_ms[i] ms), so its median is them."""
    files = []
    for i, (tpot, s) in enumerate(zip(tpots, tps)):
        repeat = _repeat(s, tpot, token_pct=token_pct, hist=hist)
        if full_ms is not None:
            repeat["step_ms_by_mode"] = {"FULL": {"mean": full_ms[i], "n": 30}, "PIECEWISE": {"mean": 3 * full_ms[i], "n": 6}}
        result = _result(label, 2, mode, ladder, [repeat, json.loads(json.dumps(repeat))], device="cuda")
        result["sweep"] = {"round": {"id": "pairs", "index": i + 1, "of": len(tpots), "seed": 0, "position": i + 1}}
        files.append(result)
    return files


def _gpu_pair(tpot_a, tpot_b, tps_a, tps_b, hist=None, full_a=None, full_b=None):
    """O2_default (paid padding 10%) and O2_interactivity, one process per value, merged as load_results
    merges them; and O1_default, which differs in -O, not only in its ladder."""
    a = _processes("O2_default", "default", DEFAULT_4, tpot_a, tps_a, token_pct=10.0, hist=hist, full_ms=full_a)
    b = _processes("O2_interactivity", "interactivity", INTERACTIVE_4, tpot_b, tps_b, hist=hist, full_ms=full_b)
    return merge_rounds(a + b + [_result("O1_default", 1, "default", DEFAULT_4, [_repeat(1.0, 1.0)] * 4, device="cuda")])


def _noise(a, b) -> str:
    """The noise floor of two sides' process samples as the verdicts print it (reports/verdict.py)."""
    return f"noise {noise_floor(a, b):.1f}%"


def test_ladder_pairs_judge_tpot_and_tokens_per_s_over_processes():
    tpot_a, tpot_b = [2.10, 2.12, 2.14, 2.16], [1.60, 1.62, 1.64, 1.66]
    tps_a, tps_b = [100, 101, 102, 103], [100.5, 101.5, 102.5, 103.5]
    pairs = ladder_pairs(_gpu_pair(tpot_a, tpot_b, tps_a, tps_b))
    assert list(pairs.columns) == PAIR_COLUMNS
    (row,) = pairs.to_dict("records")  # O1_default differs in -O, not only in its ladder
    assert (row["pair"], row["workload"], row["processes"]) == ("O2_default -> O2_interactivity", "closed-c4", "4 vs 4")
    assert row["paid padding %"] == "10.0 -> 0.0" and row["TPOT p50 ms"] == "2.13 -> 1.63"
    # every b below every a: U test p = 2 / C(8, 4) = 0.029; -23.5% far beyond the processes' 3% range
    assert row["TPOT p50"] == f"improved: -23.5% vs {_noise(tpot_a, tpot_b)}, p=0.029 (Mann-Whitney U)"
    # interleaved: +0.5%, inside the noise
    assert row["output tok/s"] == f"tie (within noise: +0.5% vs {_noise(tps_a, tps_b)}, p=0.69 (Mann-Whitney U))"
    assert row["graph step ms"] == "-" and row["graph step"] == "-"  # no replayed graph step recorded
    # 3 pads to 4 on the default ladder, to 3 on the interactivity one: different recordings
    assert row["same recordings"] == "no"
    assert row["explained by"] == "the mixed and eager steps (they follow the host), not the graph steps"


def test_ladder_pairs_stay_within_a_gpu_type():
    # the same sweep on an A100 too: a pair per GPU type, each over its own 4 processes (never 8 pooled)
    h200 = _gpu_pair([2.10, 2.12, 2.14, 2.16], [1.60, 1.62, 1.64, 1.66], [100, 101, 102, 103], [100.5, 101.5, 102.5, 103.5])
    a100 = json.loads(json.dumps(_gpu_pair([4.0] * 4, [4.0] * 4, [50, 51, 52, 53], [50, 51, 52, 53])))
    for result in a100:
        result["environment"]["gpu"] = "NVIDIA A100"
    rows = ladder_pairs([*h200, *a100]).set_index("pair")
    assert sorted(rows.index) == ["O2_default @ NVIDIA A100 -> O2_interactivity @ NVIDIA A100",
                                  "O2_default @ NVIDIA H200 -> O2_interactivity @ NVIDIA H200"]
    assert set(rows["processes"]) == {"4 vs 4"}
    assert rows.loc["O2_default @ NVIDIA H200 -> O2_interactivity @ NVIDIA H200", "TPOT p50 ms"] == "2.13 -> 1.63"
    assert rows.loc["O2_default @ NVIDIA A100 -> O2_interactivity @ NVIDIA A100", "TPOT p50 ms"] == "4.00 -> 4.00"


def test_ladder_pairs_give_the_graph_step_time_apart_from_tpot():
    tpots = ([2.0, 2.1, 2.2], [1.5, 1.6, 1.7], [1, 2, 3], [4, 5, 6])
    full_a, full_b = (1.10, 1.12, 1.14), (1.09, 1.10, 1.13)
    row = ladder_pairs(_gpu_pair(*tpots, full_a=full_a, full_b=full_b)).iloc[0]
    assert row["graph step ms"] == "1.120 -> 1.100 (FULL)"
    # -1.8% inside the processes' noise (Welch t on the means, scipy: p = 0.4685943)
    assert row["graph step"] == f"tie (within noise: -1.8% vs {_noise(full_a, full_b)}, p=0.47 (Welch's t))"
    assert row["explained by"] == "the mixed and eager steps (they follow the host), not the graph steps"
    # a graph step 15% faster on every process: the ladder explains the difference
    full_a, full_b = (1.30, 1.31, 1.29), (1.10, 1.11, 1.09)
    row = ladder_pairs(_gpu_pair(*tpots, full_a=full_a, full_b=full_b)).iloc[0]
    assert row["graph step"].startswith(f"improved: -15.4% vs {_noise(full_a, full_b)}")
    assert row["explained by"] == "the graph steps (what the ladder changes)"
    # no FULL steps on either side: the PIECEWISE ones; none at all: nothing to say
    results = _gpu_pair(*tpots, full_a=(1.10, 1.12, 1.14), full_b=(1.09, 1.10, 1.13))
    for result in results[:2]:
        for workload in result["workloads"]:
            for repeat in workload["repeats"]:
                del repeat["step_ms_by_mode"]["FULL"]
            for process in workload["round_medians"]:
                del process["medians"]["full_step_ms"]
    assert ladder_pairs(results).iloc[0]["graph step ms"] == "3.360 -> 3.300 (PIECEWISE)"
    assert ladder_pairs(_gpu_pair([2.0] * 3, [1.5] * 3, [1] * 3, [4] * 3)).iloc[0]["graph step ms"] == "-"


def test_ladder_pairs_with_three_processes_use_welchs_t_and_one_process_cannot_be_judged():
    tpot_a, tpot_b, tps_a, tps_b = [2.0, 2.02, 2.04], [1.5, 1.52, 1.54], [100, 101, 102], [80, 81, 82]
    row = ladder_pairs(_gpu_pair(tpot_a, tpot_b, tps_a, tps_b)).iloc[0]
    # means 2.02 vs 1.52, variances 0.0004 each: t = 0.5 / sqrt(0.0008 / 3) = 30.6 on 4 df
    assert row["processes"] == "3 vs 3"
    assert row["TPOT p50"].startswith(f"improved: -24.8% vs {_noise(tpot_a, tpot_b)}, p=")
    assert row["TPOT p50"].endswith("(Welch's t)")
    assert row["output tok/s"].startswith(f"regressed: -19.8% vs {_noise(tps_a, tps_b)}, p=")
    assert row["output tok/s"].endswith("(Welch's t)")
    # one process a side: no test, no noise estimate
    one = ladder_pairs(_gpu_pair([2.0], [1.5], [1], [4])).iloc[0]
    assert one["processes"] == "1 vs 1"
    assert one["TPOT p50"] == one["output tok/s"]
    assert one["TPOT p50"].startswith("n/a (1 vs 1 processes: no test, no noise estimate")
    assert one["explained by"] == "nothing: a tie"
    # one process of 4 repeats a side (a single `graphbench run`): its repeats are not samples
    single = ladder_pairs([_result("O2_default", 2, "default", DEFAULT_4, [_repeat(s, t) for s, t in
                                   zip([100, 101, 102, 103], [2.0, 2.1, 2.2, 2.3])], device="cuda"),
                           _result("O2_interactivity", 2, "interactivity", INTERACTIVE_4,
                                   [_repeat(s, t) for s, t in zip([80, 81, 82, 83], [1.5, 1.6, 1.7, 1.8])],
                                   device="cuda")]).iloc[0]
    assert single["processes"] == "1 vs 1" and single["TPOT p50"].startswith("n/a (1 vs 1 processes")


def test_same_recordings_make_an_a_a_pair_inside_the_sweep():
    # 4 and 8 are rungs of both ladders and 40 is above both tops: every step replays the same graph
    assert same_recordings(DEFAULT_4, INTERACTIVE_4, {4, 8, 40})
    assert not same_recordings(DEFAULT_4, INTERACTIVE_4, {3, 4})  # 3 pads to 4 on one, runs as 3 on the other
    assert not same_recordings(None, INTERACTIVE_4, {4}) and not same_recordings(DEFAULT_4, INTERACTIVE_4, set())
    same = {"4": 20, "8": 5, "40": 1}
    row = ladder_pairs(_gpu_pair([2.0, 2.01, 2.02], [2.0, 2.02, 2.01], [100, 101, 102], [100, 101.5, 100.5],
                                 hist=same)).iloc[0]
    assert row["same recordings"] == "yes (A/A pair)" and row["explained by"] == "nothing: a tie"
    # a tokens/s difference called between the same recordings is the host's, not the ladder's
    row = ladder_pairs(_gpu_pair([2.0, 2.01, 2.02], [2.0, 2.02, 2.01], [100, 101, 102], [80, 81, 82],
                                 hist=same)).iloc[0]
    assert row["output tok/s"].startswith("regressed:")
    assert row["explained by"] == "not the ladder: both replay the same recordings, so the host moved between processes"


def test_labels_of_one_engine_pair_by_name_and_cannot_differ():
    pairs = ladder_pairs(cpu_sweep())
    assert list(pairs["pair"]) == ["O0_default -> O0_interactivity", "O1_default -> O1_interactivity",
                                   "O2_default -> O2_interactivity"]  # fmt: skip
    assert set(pairs["workload"]) == {"every workload"}
    assert list(pairs["TPOT p50"])[2] == "same engine, measured once as O1_default"
    assert list(pairs["same recordings"]) == ["yes"] * 3 and list(pairs["processes"]) == ["-"] * 3
    assert "cannot differ" in pairs_note(pairs)


# ---------------------------------------------------------------- the CPU padding chart


def test_the_padding_chart_draws_the_ladders_asked_for_on_the_cpu(cpu_report):
    out, report = cpu_report
    chart = {c.name: c for c in report.charts}["padding.png"]
    assert chart.written
    assert PREDICTED_ONLY in png_text(chart.path)["Title"]
    found = ladders(cpu_sweep())
    assert [(lad.name, lad.sizes, lad.recorded) for lad in found] == [
        ("default: 4 sizes, top 8", tuple(DEFAULT_4), False), ("interactivity: 8 sizes, top 8", tuple(INTERACTIVE_4), False)]
    assert found[0].points == ["O1_default", "O2_default"] and found[1].points == ["O1_interactivity", "O2_interactivity"]
    # the decode steps (<= concurrency 4) of the one measurement, counted once per ladder: 3 repeats x (10 + 20)
    assert found[0].steps == {3: 30, 4: 60} and found[1].steps == {3: 30, 4: 60}


# ---------------------------------------------------------------- one engine measured once


def test_aliases_appear_under_each_label_and_count_once(cpu_report):
    out, report = cpu_report
    with open(out / SUMMARY_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["label"], r["same_engine_as"]) for r in rows] == [
        ("O0_default", ""), ("O0_interactivity", "O0_default"), ("O1_default", ""), ("O1_interactivity", "O1_default"),
        ("O2_default", "O1_default"), ("O2_interactivity", "O1_default")]  # fmt: skip
    assert rows[4]["output_tokens_per_s"] == rows[2]["output_tokens_per_s"] == "100.0"
    assert [r["busy_host_repeats"] for r in rows] == ["0", "0", "1", "1", "1", "1"]
    assert float(rows[2]["padding_token_pct"]) == 0.0
    (best,) = report.headline.itertuples()  # one row per concurrency: the measurement is ranked once
    assert (best.best, best.best_also) == ("O1_default", "O1_interactivity, O2_default, O2_interactivity")
    md = (out / REPORT_MD).read_text()
    assert "| 4 | O1_default (also O1_interactivity, O2_default, O2_interactivity: same engine, measured once) |" in md
    assert "- O1_interactivity, O2_default, O2_interactivity = O1_default (same engine, measured once): " + SAME_REASON in md
    assert "2 points ok, 0 failed (+4 labels that ran the same engine as one of them)" in md
    assert "| O2_default = O1_default (same engine, measured once) | every workload: see O1_default |" in md
    assert "O2_default = O1_default (same engine, measured once)" in (out / REPORT_HTML).read_text()


def test_the_repeats_table_keeps_the_aliases_of_a_label_of_two_models(tmp_path):
    # the same sweep of a second model: the repeats table names O1_default's rows per model, and each still
    # stands for its aliases (their rows were dropped: the aliases were looked up by the bare label)
    other = json.loads(json.dumps(cpu_sweep()))
    for r in other:
        r["model"] = "tiny-qwen"
    report = write_report([_write([*cpu_sweep(), *other], tmp_path / "results")], tmp_path / "report")
    md = (report.out_dir / REPORT_MD).read_text()
    repeats = md[md.index("## Repeats"):]
    for model in ("tiny-llama", "tiny-qwen"):
        assert (f"| O2_default ({model}) = O1_default ({model}) (same engine, measured once) | every workload: see "
                f"O1_default ({model}) |") in repeats


def test_alias_map_and_ladder():
    results = cpu_sweep()
    assert alias_map(results) == {"O0_default": ["O0_interactivity"],
                                  "O1_default": ["O1_interactivity", "O2_default", "O2_interactivity"]}
    # a label with a result of its own is not an alias
    own = _result("O2_default", 2, "default", DEFAULT_4, [_repeat(1.0, 1.0)])
    assert alias_map([*results, own])["O1_default"] == ["O1_interactivity", "O2_interactivity"]
    o1 = results[1]
    assert alias_ladder(o1, "O1_interactivity") == INTERACTIVE_4 and alias_ladder(o1, "O2_default") == DEFAULT_4
    assert alias_ladder(o1, "O1_tuned8") is None  # the label names no ladder
    custom = json.loads(json.dumps(o1))
    custom["config"]["compilation"]["cudagraph_capture_sizes"] = [2, 8]  # hand-given: nothing told for the alias
    assert alias_ladder(custom, "O1_interactivity") is None


def test_with_aliases_keeps_order_and_marks_rows():
    import pandas as pd

    table = pd.DataFrame({"point": ["a", "a", "b"], "x": [1.0, 2.0, 3.0]})
    out = with_aliases(table, "point", {"a": ["a2"]})
    assert list(out["point"]) == ["a", "a", "a2 = a (same engine, measured once)", "a2 = a (same engine, measured once)", "b"]
    assert list(out["x"]) == [1.0, 2.0, 1.0, 2.0, 3.0]
    collapsed = with_aliases(table, "point", {"b": ["b2"]}, marked=False, collapse="x")
    assert list(collapsed["point"]) == ["a", "a", "b", "b2"] and collapsed.iloc[3]["x"] == "every workload: see b"


# ---------------------------------------------------------------- busy host


def test_busy_host_repeats_are_marked_and_left_out_of_the_spread():
    o1 = cpu_sweep()[1]
    assert busy_repeats(o1["workloads"][0]) == {2: "host load 3.1 > 2 cores"}
    assert busy_repeats({"repeats": [{}, {}], "busy_host_repeats": [1, 7]}) == {1: "busy host"}
    (row,) = repeats_table([o1]).to_dict("records")
    assert row["spread %"] == pytest.approx(100 * 2 / 101)  # 100 and 102: the calm repeats
    assert row["output tok/s"] == 101.0
    assert row["busy host"] == ("repeat 3 of 3: host load 3.1 > 2 cores; left out (with it the spread is 42.0%)")
    note = steadiness_note(repeats_table([o1]))
    assert note == ("Every workload's tokens/s spread is within 3% (largest 2.0%). The host was busy (another process "
                    "wanted the CPU) during repeats of 1 workloads, whose spread above leaves those repeats out or is "
                    "not given: O1_default closed-c4: repeat 3 of 3: host load 3.1 > 2 cores; left out (with it the "
                    "spread is 42.0%).")


def test_a_workload_with_fewer_than_two_calm_repeats_has_no_spread():
    two_busy = [_repeat(100.0, 4.0), _repeat(60.0, 6.0, busy="host load 3.1 > 2 cores"),
                _repeat(70.0, 5.0, busy="waited 31% of the repeat for a CPU")]
    (row,) = repeats_table([_result("O1_default", 1, "default", DEFAULT_4, two_busy)]).to_dict("records")
    assert math.isnan(row["spread %"]) and math.isnan(row["NONE spread %"])
    assert row["busy host"] == ("repeat 2 of 3: host load 3.1 > 2 cores; repeat 3 of 3: waited 31% of the repeat for "
                                "a CPU; too few other repeats for a spread (with them the spread is 57.1%)")
    assert steadiness_note(repeats_table([_result("O1_default", 1, "default", DEFAULT_4, two_busy)])).startswith(
        "No workload kept two repeats off a busy host: no spread to judge the engine by. The host was busy")


def test_the_report_marks_busy_repeats(cpu_report):
    out, _ = cpu_report
    md = (out / REPORT_MD).read_text()
    # (">" as an entity: report.md passes no raw HTML through)
    assert "| busy host |" in md and "repeat 3 of 3: host load 3.1 &gt; 2 cores; left out" in md
    assert "The host was busy (another process wanted the CPU) during repeats of 1 workloads" in md


# ---------------------------------------------------------------- the CPU banner


def test_the_cpu_banner_opens_the_report(cpu_report):
    out, _ = cpu_report
    md = (out / REPORT_MD).read_text()
    banner = next(line for line in md.splitlines() if line.startswith("> "))
    assert banner.startswith("> **CPU run: no CUDA graph was recorded.** CUDA graphs need a GPU: these results come "
                             "from the CPU")
    assert "compile start-up cold vs warm, the compile cache" in banner and "eager and compiled tokens/s" in banner
    assert "What it cannot: graph memory, capture time, graph replay speed, and measured padding" in banner
    assert md.index("CPU run") < md.index("## Headline")
    assert 'class="banner"><strong>CPU run: no CUDA graph was recorded.</strong>' in (out / REPORT_HTML).read_text()


def test_no_banner_for_gpu_results_and_a_partial_one_for_mixed():
    gpu = _result("O2_default", 2, "default", DEFAULT_4, [_repeat(1.0, 1.0)], device="cuda")
    assert cpu_banner([gpu]) == ""
    mixed = cpu_banner([gpu, cpu_sweep()[1]])
    assert "1 of the 2 graphbench points ran on the CPU (O1_default)" in mixed
