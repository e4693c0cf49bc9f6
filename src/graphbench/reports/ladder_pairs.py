"""Whether a ladder's padding costs time: points that differ only in their ladder, workload by workload.

Two graphbench points form a pair when their configs are the same but for the ladder
(compilation.cudagraph_capture_sizes, max_cudagraph_capture_size, performance_mode) on the same model,
system and device. For each workload both ran: the paid padding of each, the TPOT p50 and output
tokens/s medians over repeats, b's change against a, and a two-sided p over the repeats (repeats on a
busy host are left out): Mann-Whitney U (reports.stats) when it can reach p < 0.05 with that many
repeats, else Welch's t-test (reports.stats; 3 vs 3: the U test's smallest p is 0.1), which assumes
normal repeats; the "test" column says which. With fewer than 2 repeats a side: "too few repeats to test".

Labels that stand for another's measurement (reports.aliases) pair by their names: two labels that
differ only in the ladder part ("O2_default", "O2_interactivity") and run one engine get one row saying
so, since one measurement cannot differ from itself.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from graphbench.reports.aliases import SAME_ENGINE, alias_map, ladder_mode
from graphbench.reports.frame import GRAPHBENCH, asked_ladder, busy_repeats, metric_median, ok_results
from graphbench.reports.stats import mann_whitney_u, median, min_two_sided_p, welch_t_test

ALPHA = 0.05
TOO_FEW = "too few repeats to test"
U_TEST = "Mann-Whitney U"
T_TEST = "Welch t"
LADDER_KEYS = ("cudagraph_capture_sizes", "max_cudagraph_capture_size", "performance_mode")
PAIR_COLUMNS = [
    "pair", "workload", "repeats", "paid padding %", "graph step ms", "graph step change %", "graph step p", "TPOT p50 ms",
    "TPOT change %", "TPOT p", "output tok/s change %", "tok/s p", "test",
]  # fmt: skip
PAIRS_NOTE = (
    "Points that differ only in their ladder, on the same workload: b against a. Graph step: the mean time of a "
    "step that replayed a FULL recording (PIECEWISE where neither side has FULL steps), median over repeats: what "
    "padding costs where it is paid, on the GPU. TPOT also counts the mixed and prefill steps, which run piecewise "
    "or eager and follow the host's speed, so it moves between processes by more than padding does. p: two-sided, "
    "over the repeats (below 0.05: unlikely to be the repeats' own noise); repeats on a busy host are left out."
)


def pairs_note(pairs: pd.DataFrame) -> str:
    """The note over the pairs table; with a word on the test that the repeats allowed."""
    text = PAIRS_NOTE
    if pairs.empty:
        return text
    if (pairs["test"] == T_TEST).any():
        n = max(int(x) for x in pairs.loc[pairs["test"] == T_TEST, "repeats"].str.split(" ").str[0])
        text += (f" {T_TEST}: with {n} repeats a side the Mann-Whitney U test's smallest p is "
                 f"{min_two_sided_p(n, n):.2g}, so no change could show as significant by it; Welch's t-test "
                 "can, if each side's repeats are roughly normal (a steady metric's are; a host-bound one's may "
                 f"not be). 4 repeats a side let the U test reach {min_two_sided_p(4, 4):.2g} (sweep --repeats 4 "
                 "or more).")
    if (pairs["workload"] == "every workload").any():
        text += (f" Labels that ran one engine ({SAME_ENGINE}) cannot differ: on this device their ladders "
                 "change nothing.")
    return text


def _engine_key(result: Mapping[str, Any]) -> str:
    config = json.loads(json.dumps(result.get("config") or {}))
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


def _values(workloads: list[Mapping[str, Any]], metric: str) -> tuple[list[float], int]:
    """The metric over the calm repeats, and how many busy-host repeats were left out."""
    values, busy = [], 0
    for w in workloads:
        flagged = busy_repeats(w)
        busy += len(flagged)
        for i, r in enumerate(w["repeats"]):
            value = r.get("output_tokens_per_s") if metric == "tok/s" else (r.get("tpot_ms") or {}).get("p50")
            if i not in flagged and isinstance(value, (int, float)) and not math.isnan(value):
                values.append(float(value))
    return values, busy


def _graph_step_ms(workloads: list[Mapping[str, Any]], mode: str) -> list[float]:
    """Per calm repeat: the mean ms of its steps that ran in this runtime mode (step_ms_by_mode)."""
    values = []
    for w in workloads:
        flagged = busy_repeats(w)
        for i, r in enumerate(w["repeats"]):
            by_mode = r.get("step_ms_by_mode") if isinstance(r.get("step_ms_by_mode"), Mapping) else {}
            mean = (by_mode.get(mode) or {}).get("mean") if isinstance(by_mode.get(mode), Mapping) else None
            if i not in flagged and isinstance(mean, (int, float)) and not math.isnan(mean):
                values.append(float(mean))
    return values


def _graph_steps(a: list[Mapping[str, Any]], b: list[Mapping[str, Any]]) -> tuple[str, float, float | str]:
    """'1.09 -> 1.09 (FULL)', b's change in % and its p, for the first mode both sides replayed;
    ('-', NaN, NaN) if none."""
    for mode in ("FULL", "PIECEWISE"):
        ga, gb = _graph_step_ms(a, mode), _graph_step_ms(b, mode)
        if ga and gb:
            return f"{median(ga):.3f} -> {median(gb):.3f} ({mode})", _change(ga, gb), _p(ga, gb)
    return "-", math.nan, math.nan


def test_name(n_a: int, n_b: int) -> str:
    """The test these repeat counts allow: the U test where it can reach ALPHA, else Welch's t."""
    if min(n_a, n_b) < 2:
        return TOO_FEW
    return U_TEST if min_two_sided_p(n_a, n_b) < ALPHA else T_TEST


def _p(a: list[float], b: list[float]) -> float | str:
    test = test_name(len(a), len(b))
    if test == TOO_FEW:
        return TOO_FEW
    return mann_whitney_u(a, b).p_value if test == U_TEST else welch_t_test(a, b)


def _change(a: list[float], b: list[float]) -> float:
    return 100 * (median(b) - median(a)) / median(a) if a and b and median(a) else math.nan


def _rows(name: str, a: list[Mapping[str, Any]], b: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    wa, wb = _workloads(a), _workloads(b)
    for workload in [w for w in wa if w in wb]:
        (ta, busy_a), (tb, busy_b) = _values(wa[workload], "tpot"), _values(wb[workload], "tpot")
        (sa, _), (sb, _) = _values(wa[workload], "tok/s"), _values(wb[workload], "tok/s")
        busy = busy_a + busy_b
        pa, pb = (metric_median(ws[workload][0], "padding_token_pct") for ws in (wa, wb))
        graph_ms, graph_change, graph_p = _graph_steps(wa[workload], wb[workload])
        rows.append({
            "pair": name, "workload": workload,
            "repeats": f"{len(sa)} vs {len(sb)}" + (f" ({busy} on a busy host left out)" if busy else ""),
            "paid padding %": f"{pa:.1f} -> {pb:.1f}", "graph step ms": graph_ms, "graph step change %": graph_change,
            "graph step p": graph_p,
            "TPOT p50 ms": f"{median(ta):.2f} -> {median(tb):.2f}" if ta and tb else "-",
            "TPOT change %": _change(ta, tb), "TPOT p": _p(ta, tb) if ta and tb else math.nan,
            "output tok/s change %": _change(sa, sb), "tok/s p": _p(sa, sb) if sa and sb else math.nan,
            "test": test_name(len(sa), len(sb)),
        })  # fmt: skip
    return rows


def _same_engine_row(a: str, b: str, engine: str) -> dict[str, Any]:
    said = f"{SAME_ENGINE} as {engine}"
    return {"pair": f"{a} -> {b}", "workload": "every workload", "repeats": "-", "paid padding %": "-",
            "graph step ms": "-", "graph step change %": math.nan, "graph step p": said, "TPOT p50 ms": "-", "TPOT change %": math.nan, "TPOT p": said, "output tok/s change %": math.nan,
            "tok/s p": said}  # fmt: skip


def _named_apart_by_ladder(a: str, b: str) -> bool:
    """The labels differ in one '_' part only, and both those parts name a ladder."""
    pa, pb = a.split("_"), b.split("_")
    if len(pa) != len(pb):
        return False
    diff = [(x, y) for x, y in zip(pa, pb) if x != y]
    return len(diff) == 1 and all(ladder_mode(x) or x.startswith("tuned") for x in diff[0])


def ladder_pairs(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """See the module doc; PAIR_COLUMNS."""
    ok = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    by_label: dict[str, list[Mapping[str, Any]]] = {}
    for r in ok:
        by_label.setdefault(str(r.get("label")), []).append(r)
    rows = []
    for a, b in itertools.combinations(sorted(by_label), 2):
        ra, rb = by_label[a][0], by_label[b][0]
        if _engine_key(ra) == _engine_key(rb) and asked_ladder(ra) != asked_ladder(rb):
            rows += _rows(f"{a} -> {b}", by_label[a], by_label[b])
    engine_of = {label: label for label in by_label}
    for label, aliases in alias_map(results).items():
        engine_of.update({alias: label for alias in aliases})
    for a, b in itertools.combinations(sorted(engine_of), 2):
        if (a in by_label and b in by_label) or not _named_apart_by_ladder(a, b):
            continue
        ea, eb = engine_of[a], engine_of[b]
        if ea == eb:
            rows.append(_same_engine_row(a, b, ea))
        else:
            name = " -> ".join(x if x == e else f"{x} (= {e})" for x, e in ((a, ea), (b, eb)))
            rows += _rows(name, by_label[ea], by_label[eb])
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)
