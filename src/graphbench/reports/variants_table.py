"""What -O3's compile_sizes variants bought (the report's "compile_sizes variants" table).

At start-up the engine times each compile_sizes size's step with the size's compiled variants and
with the dynamic pieces, both as CUDA graphs, and keeps the faster (runner/compile/variant_choice.py).
One row per point x start-up x size: both step times, how much faster or slower the variants were,
and what ran. A point whose variants were kept unmeasured (the CPU, tensor parallel,
compilation.static_variants = always) gets one row saying so. Pure pandas: no torch.
"""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from graphbench.reports.frame import GRAPHBENCH, startups_of
from graphbench.reports.point_names import point_namer

VARIANTS_COLUMNS = ["point", "start", "size", "step with variants ms", "step dynamic ms", "variants vs dynamic %", "ran"]

VARIANTS_NOTE = ("-O3 compiles a variant of each piece for the small decode sizes, its GEMMs autotuned by Inductor "
                 "where a projection would run cuBLAS (where graphbench's kernels run every projection the variant "
                 "is the piece itself). At start-up the engine times each size's step with the variants and with "
                 "the dynamic pieces (both as CUDA graphs) and keeps the variants only when they are at least 1% faster.")


def variants_table(results: list[Mapping[str, Any]]) -> pd.DataFrame:
    """Rows for the graphbench points that compiled compile_sizes variants (empty when none did)."""
    rows = []
    ours = [r for r in results if (r.get("system") or GRAPHBENCH) == GRAPHBENCH and r.get("status", "ok") == "ok"]
    name = point_namer(ours)  # (one label on two GPU types, or of two models: named apart)
    for result in ours:
        for startup in startups_of(result):
            choice = startup.get("static_variants")
            if not isinstance(choice, Mapping) or choice.get("policy") in (None, "none"):
                continue  # no variants (or a result written before the choice was recorded)
            start = "cold" if startup.get("cold") else "warm"
            if choice.get("policy") != "measured":
                rows.append([name(result), start, "all", None, None, None,
                             f"variants, unmeasured ({choice.get('note') or choice.get('policy')})"])
                continue
            for size in choice.get("piece_sizes") or []:
                rows.append([name(result), start, size, None, None, None,
                             "the traced pieces: graphbench's kernels run every projection, nothing compiled"])
            for t in choice.get("sizes") or []:
                static_ms, dynamic_ms = t.get("static_ms"), t.get("dynamic_ms")
                change = 100.0 * (static_ms / dynamic_ms - 1.0) if static_ms and dynamic_ms else None
                ran = "variants" if t.get("kept") == "static" else "dynamic pieces"
                rows.append([name(result), start, t.get("size"), static_ms, dynamic_ms, change, ran])
    return pd.DataFrame(rows, columns=VARIANTS_COLUMNS)
