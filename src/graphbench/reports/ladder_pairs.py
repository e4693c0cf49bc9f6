"""Whether a ladder's padding costs time: points that differ only in their ladder, workload by workload.

Two graphbench points form a pair when their configs are the same but for the ladder
(compilation.cudagraph_capture_sizes, max_cudagraph_capture_size, performance_mode) on the same model,
system and device. For each workload both ran: the paid padding of each, whether both replay the same
recordings (every batch size pads to the same rung: an A/A pair inside the sweep), and b's verdict
against a over processes (reports/verdict.py) for the replayed graph step, TPOT p50 and output tokens/s,
with which part explains a difference.

Labels that stand for another's measurement (reports.aliases) pair by their names: two labels that
differ only in the ladder part ("O2_default", "O2_interactivity") and run one engine get one row saying
so, since one measurement cannot differ from itself.
"""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from graphbench.reports.aliases import SAME_ENGINE, alias_map, ladder_mode
from graphbench.reports.frame import GRAPHBENCH, asked_ladder, capture_sizes_of, metric_median, ok_results
from graphbench.reports.gate_thresholds import min_effect_pct
from graphbench.reports.point_names import engine_config, point_namer, result_model
from graphbench.reports.rounds import result_gpu, workload_samples
from graphbench.reports.stats import median
from graphbench.reports.verdict import IMPROVED, NA, REGRESSED, TIE, Verdict, judge

LADDER_KEYS = ("cudagraph_capture_sizes", "max_cudagraph_capture_size", "performance_mode")
PAIR_COLUMNS = [
    "pair", "workload", "processes", "paid padding %", "same recordings", "graph step ms", "graph step",
    "TPOT p50 ms", "TPOT p50", "output tok/s", "explained by",
]  # fmt: skip
PAIRS_NOTE = (
    "Points that differ only in their ladder, on the same workload: b against a, over processes (each a round "
    "of the sweep: its median over its repeats). Graph step: the mean time of a step that replayed a FULL "
    "recording (PIECEWISE where neither side has FULL steps): what padding costs where it is paid, on the GPU. "
    "TPOT and tokens/s also count the mixed and prefill steps, which run piecewise or eager and follow the "
    "host's speed. A change is called only when significant over the processes, beyond the noise measured "
    "between them and beyond the 5% minimum effect; else it is a tie, with its change and "
    "noise. 'Same recordings': every batch size the steps had pads to the same rung on both ladders, so the "
    "two points replay the same graphs: an A/A pair inside the sweep, where any called difference is the "
    "host's. 'Explained by' says which part moved."
)


def pairs_note(pairs: pd.DataFrame) -> str:
    """The note over the pairs table."""
    text = PAIRS_NOTE
    if not pairs.empty and (pairs["workload"] == "every workload").any():
        text += (f" Labels that ran one engine ({SAME_ENGINE}) cannot differ: on this device their ladders "
                 "change nothing.")
    return text


def _engine_key(result: Mapping[str, Any]) -> str:
    config = engine_config(result)
    comp = config.get("compilation") if isinstance(config.get("compilation"), dict) else {}
    for key in LADDER_KEYS:
        comp.pop(key, None)
    env = result.get("environment") if isinstance(result.get("environment"), Mapping) else {}
    return json.dumps([config, result.get("model"), result.get("system"), env.get("device"), env.get("gpu")],
                      sort_keys=True, default=str)


def _workloads(results: list[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Workload name -> the workload dicts of these results (one label's runs, pooled)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for result in results:
        for w in result.get("workloads") or []:
            if isinstance(w, Mapping) and w.get("repeats"):
                out.setdefault(str(w.get("name") or ""), []).append(w)
    return out


def _samples(workloads: list[Mapping[str, Any]], metric: str) -> list[float]:
    return [v for w in workloads for v in workload_samples(w, metric)]


def _verdict(a: list[float], b: list[float], metric: str, higher: bool) -> Verdict | None:
    return judge(a, b, higher, min_effect_pct=min_effect_pct(metric)) if a and b else None


def _text(v: Verdict | None) -> str:
    if v is None:
        return "-"
    if v.verdict == NA:
        return f"n/a ({v.reason})"
    return f"{v.verdict}: {v.reason}" if v.verdict != TIE else f"tie ({v.reason})"


def _batch_sizes(workloads: list[Mapping[str, Any]]) -> set[int]:
    sizes = set()
    for w in workloads:
        for r in w.get("repeats") or []:
            hist = r.get("batch_size_histogram") if isinstance(r, Mapping) else None
            sizes |= {int(k) for k in (hist or {}) if str(k).isdigit()}
    return sizes


def same_recordings(ladder_a: list[int] | None, ladder_b: list[int] | None, sizes: set[int]) -> bool:
    """Whether every batch size pads to the same rung on both ladders (eager above both tops): the two
    points replay the very same recordings. False without a recorded ladder (nothing was replayed)."""
    if not ladder_a or not ladder_b or not sizes:
        return False

    def pad(ladder: list[int], n: int) -> int | None:
        i = bisect.bisect_left(ladder, n)
        return ladder[i] if i < len(ladder) else None

    la, lb = sorted(ladder_a), sorted(ladder_b)
    return all(pad(la, n) == pad(lb, n) for n in sizes)


def _graph_steps(a: list[Mapping[str, Any]], b: list[Mapping[str, Any]]) -> tuple[str, Verdict | None]:
    """'1.09 -> 1.09 (FULL)' and b's verdict against a, for the first mode both sides replayed."""
    for mode, metric in (("FULL", "full_step_ms"), ("PIECEWISE", "piecewise_step_ms")):
        ga, gb = _samples(a, metric), _samples(b, metric)
        if ga and gb:
            return f"{median(ga):.3f} -> {median(gb):.3f} ({mode})", _verdict(ga, gb, metric, False)
    return "-", None


def _explained(graph: Verdict | None, tpot: Verdict | None, tps: Verdict | None, same: bool) -> str:
    called = {v.verdict for v in (tpot, tps) if v is not None}
    if graph is not None and graph.beyond_noise:
        return "the graph steps (what the ladder changes)"
    if called & {IMPROVED, REGRESSED}:
        if same:
            return "not the ladder: both replay the same recordings, so the host moved between processes"
        return "the mixed and eager steps (they follow the host), not the graph steps"
    return "nothing: a tie"


def _rows(name: str, a: list[Mapping[str, Any]], b: list[Mapping[str, Any]],
          ladders: tuple[list[int] | None, list[int] | None]) -> list[dict[str, Any]]:
    rows = []
    wa, wb = _workloads(a), _workloads(b)
    for workload in [w for w in wa if w in wb]:
        ta, tb = _samples(wa[workload], "tpot_p50_ms"), _samples(wb[workload], "tpot_p50_ms")
        sa, sb = _samples(wa[workload], "output_tokens_per_s"), _samples(wb[workload], "output_tokens_per_s")
        pa, pb = (metric_median(ws[workload][0], "padding_token_pct") for ws in (wa, wb))
        graph_ms, graph = _graph_steps(wa[workload], wb[workload])
        tpot, tps = _verdict(ta, tb, "tpot_p50_ms", False), _verdict(sa, sb, "output_tokens_per_s", True)
        same = same_recordings(*ladders, _batch_sizes(wa[workload]) | _batch_sizes(wb[workload]))
        rows.append({
            "pair": name, "workload": workload, "processes": f"{len(sa)} vs {len(sb)}",
            "paid padding %": f"{pa:.1f} -> {pb:.1f}", "same recordings": "yes (A/A pair)" if same else "no",
            "graph step ms": graph_ms, "graph step": _text(graph),
            "TPOT p50 ms": f"{median(ta):.2f} -> {median(tb):.2f}" if ta and tb else "-", "TPOT p50": _text(tpot),
            "output tok/s": _text(tps), "explained by": _explained(graph, tpot, tps, same),
        })  # fmt: skip
    return rows


def _same_engine_row(a: str, b: str, engine: str) -> dict[str, Any]:
    said = f"{SAME_ENGINE} as {engine}"
    return {"pair": f"{a} -> {b}", "workload": "every workload", "processes": "-", "paid padding %": "-",
            "same recordings": "yes", "graph step ms": "-", "graph step": said, "TPOT p50 ms": "-", "TPOT p50": said,
            "output tok/s": said, "explained by": said}  # fmt: skip


def _named_apart_by_ladder(a: str, b: str) -> bool:
    """The labels differ in one '_' part only, and both those parts name a ladder."""
    pa, pb = a.split("_"), b.split("_")
    if len(pa) != len(pb):
        return False
    diff = [(x, y) for x, y in zip(pa, pb) if x != y]
    return len(diff) == 1 and all(ladder_mode(x) or x.startswith("tuned") for x in diff[0])


def ladder_pairs(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """See the module doc; PAIR_COLUMNS. Pairs are of one model on one GPU type: a label's results on two GPU
    types (or of two models) are two pairs, named apart (reports/point_names.py), never one pooling both."""
    ok = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    name = point_namer(ok)
    sources: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in ok:
        sources.setdefault((result_model(r), result_gpu(r)), []).append(r)
    rows = []
    for group in sources.values():
        rows += _pairs(group, lambda label, r=group[0]: name(dict(r, label=label)))
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def _pairs(ok: list[Mapping[str, Any]], named: Callable[[str], str]) -> list[dict[str, Any]]:
    """The rows of one model's results on one GPU type; named: a label as the report names it."""
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for r in ok:
        by_label.setdefault(str(r.get("label")), []).append(r)
    rows = []
    for a, b in itertools.combinations(sorted(by_label), 2):
        ra, rb = by_label[a][0], by_label[b][0]
        if _engine_key(ra) == _engine_key(rb) and asked_ladder(ra) != asked_ladder(rb):
            rows += _rows(f"{named(a)} -> {named(b)}", by_label[a], by_label[b],
                          (capture_sizes_of(ra), capture_sizes_of(rb)))
    engine_of = {label: label for label in by_label}
    for label, aliases in alias_map(ok).items():
        engine_of.update({alias: label for alias in aliases})
    for a, b in itertools.combinations(sorted(engine_of), 2):
        if (a in by_label and b in by_label) or not _named_apart_by_ladder(a, b):
            continue
        ea, eb = engine_of[a], engine_of[b]
        if ea == eb:
            rows.append(_same_engine_row(named(a), named(b), named(ea)))
        else:
            name = " -> ".join(named(x) if x == e else f"{named(x)} (= {named(e)})" for x, e in ((a, ea), (b, eb)))
            rows += _rows(name, by_label[ea], by_label[eb],
                          (capture_sizes_of(by_label[ea][0]), capture_sizes_of(by_label[eb][0])))
    return rows
