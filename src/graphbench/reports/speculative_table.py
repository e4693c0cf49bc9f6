"""What speculative decoding bought (the report's "Speculative decoding" table).

One row per graphbench point with k > 0 draft tokens x workload, shown when the results vary k:
the drafter, its acceptance (accepted proposals over proposed drafts, filler apart), the mean accepted
tokens per verified request-step, the drafted and wasted tokens, and output tokens/s and TPOT p50
against the point with the same config at k = 0 on the same workload (of the same model on the same GPU
type). Pure pandas: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, metric_median, ok_results
from graphbench.reports.point_names import engine_config, point_namer, result_model
from graphbench.reports.rounds import result_gpu
from graphbench.reports.stats import percent_change

SPECULATIVE_COLUMNS = [
    "point", "workload", "k", "drafter", "acceptance %", "accepted / step", "proposed", "drafted", "wasted",
    "tok/s", "tok/s vs k=0 %", "TPOT p50 ms", "TPOT vs k=0 %", "graphs of uniform steps",
]  # fmt: skip
SPECULATIVE_NOTE = (
    "Each decoding request verifies k drafted tokens a step (1 + k tokens in the batch); the accepted ones and "
    "one more are kept. Acceptance: accepted proposals over proposed drafts, as vLLM and TensorRT-LLM report it (a "
    "drafter that finds fewer than k fills the rest with the last token: drafted counts those filler positions, "
    "proposed does not). Accepted / step: per request and step that verified drafts. Wasted: drafted tokens "
    "rejected, computed for nothing. The k = 0 columns compare with the same config without drafts on the same "
    "workload; the workload's prompt kind (random, repeated spans or real text) is in its name."
)


def _k(result: Mapping[str, Any]) -> int:
    spec = (result.get("config") or {}).get("speculative")
    k = spec.get("num_speculative_tokens") if isinstance(spec, Mapping) else 0
    return k if isinstance(k, int) and not isinstance(k, bool) else 0


def _without_drafts(config: Any) -> Any:
    """The config less what speculative decoding changes (its section, and the ladder rounded to 1 + k)."""
    if not isinstance(config, Mapping):
        return config
    plain = {key: value for key, value in config.items() if key != "speculative"}
    compilation = plain.get("compilation")
    if isinstance(compilation, Mapping):
        plain["compilation"] = {key: value for key, value in compilation.items()
                                if key not in ("cudagraph_capture_sizes", "max_cudagraph_capture_size")}
    return plain


def _uniform_modes(workload: Mapping[str, Any]) -> str:
    seen: dict[str, int] = {}
    for repeat in workload.get("repeats") or []:
        modes = repeat.get("uniform_runtime_modes") if isinstance(repeat, Mapping) else None
        for mode, count in (modes if isinstance(modes, Mapping) else {}).items():
            if isinstance(count, int):
                seen[str(mode)] = seen.get(str(mode), 0) + count
    return ", ".join(f"{m}: {c}" for m, c in sorted(seen.items())) or "none"


def speculative_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows for points with k > 0 when the results hold more than one k (empty otherwise)."""
    points = [r for r in ok_results(results) if (r.get("system") or GRAPHBENCH) == GRAPHBENCH]
    if len({_k(r) for r in points}) < 2:
        return pd.DataFrame(columns=SPECULATIVE_COLUMNS)
    def key(r: Mapping[str, Any], w: Mapping[str, Any]) -> tuple[str, ...]:
        # (k = 0 of the same model on the same GPU type: another machine's is the hardware's gap)
        return (repr(_without_drafts(engine_config(r))), result_model(r), result_gpu(r), str(w.get("name")))

    baselines: dict[tuple[str, ...], tuple[float, float]] = {}
    for r in points:
        if _k(r) == 0:
            for w in r.get("workloads") or []:
                baselines[key(r, w)] = (metric_median(w, "output_tokens_per_s"), metric_median(w, "tpot_p50_ms"))
    rows = []
    name = point_namer(points)
    for r in points:
        k = _k(r)
        if k == 0:
            continue
        method = ((r.get("config") or {}).get("speculative") or {}).get("method", "?")
        for w in r.get("workloads") or []:
            base_tps, base_tpot = baselines.get(key(r, w), (None, None))
            tps, tpot = metric_median(w, "output_tokens_per_s"), metric_median(w, "tpot_p50_ms")
            acceptance = metric_median(w, "spec_acceptance_rate")
            rows.append([name(r), w.get("name"), k, method, 100.0 * acceptance,
                         metric_median(w, "spec_mean_accepted_tokens"), metric_median(w, "spec_proposed_tokens"),
                         metric_median(w, "spec_drafted_tokens"),
                         metric_median(w, "spec_wasted_tokens"), tps, percent_change(tps, base_tps), tpot,
                         percent_change(tpot, base_tpot), _uniform_modes(w)])
    return pd.DataFrame(rows, columns=SPECULATIVE_COLUMNS)
