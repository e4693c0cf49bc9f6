"""What an engine's start-up report and step records say, as lines of text (`run`'s summary, `generate`).

Rendered from the `startup` record a result keeps (runner/records.startup_record, docs/RESULTS_SCHEMA.md), so a
result file and a live engine print alike. No torch.
"""

from __future__ import annotations

from typing import Any

GIB = 2**30
# the start-up's phases, in the order they run (the report's startup chart names them alike)
STARTUP_PHASES = (("load_s", "weights"), ("kv_cache_s", "KV cache"), ("kernel_choices_s", "kernel choices"),
                  ("compile_import_s", "compile stack import"), ("dynamo_s", "Dynamo"), ("inductor_s", "Inductor"),
                  ("compile_sizes_s", "compile_sizes"), ("loaded_s", "compiled forward loaded"),
                  ("capture_s", "capture"))


def startup_lines(s: dict[str, Any]) -> list[str]:
    """The start-up in a few lines: seconds per phase (those of 5 ms or more; the rest as 'other'), the graphs recorded
    per mode and their memory, the KV cache, and the compile_sizes and kernel choices where there are any."""
    parts = [(name, float(s.get(key) or 0.0)) for key, name in STARTUP_PHASES]
    shown = [(name, seconds) for name, seconds in parts if seconds >= 0.005 or name == "weights"]
    other = s["total_s"] - sum(seconds for _, seconds in parts)
    phases = ", ".join(f"{name} {seconds:.2f} s" + (precompiled_note(s.get("capture_precompiled") or [0, 0.0])
                                                       if name == "capture" else "") for name, seconds in shown)
    lines = [f"start-up {s['total_s']:.2f} s{_compile_kind(s)}: {phases}" + (f", other {other:.2f} s" if other >= 0.005 else "")]
    graphs = {mode: n for mode, n in (s.get("num_graphs") or {}).items() if n}
    if graphs:
        recordings = sum((s.get("num_recordings") or {}).values())
        deferred = f", {s['deferred_recordings']} left for first use" if s.get("deferred_recordings") else ""
        lines.append("CUDA graphs: " + ", ".join(f"{mode} {n}" for mode, n in graphs.items())
                     + f" keys ({recordings} recordings{deferred}), graph memory {s['graph_memory_bytes'] / GIB:.3f} GiB "
                     f"(pool {s['graph_pool_bytes'] / GIB:.3f} GiB){_setup_note(s)}")
    else:
        lines.append(f"CUDA graphs: none (cudagraph mode {(s.get('cudagraph_mode') or {}).get('resolved', '-')})")
    lines.append(f"KV cache {s['kv_cache_tokens']} tokens ({s['kv_cache_bytes'] / GIB:.3f} GiB), weights "
                 f"{s['weights_bytes'] / GIB:.3f} GiB")
    return lines + [line for line in (variants_line(s.get("static_variants") or {}),
                                      kernel_choices_line(s.get("kernel_choices") or {})) if line]


def _compile_kind(s: dict[str, Any]) -> str:
    """How the forward was compiled: ' (cold: compiled)', ' (warm: ...)', or '' when it was not compiled."""
    if s.get("compile_cache_dir") is None:
        return ""
    if s.get("cold"):
        return " (cold: compiled)"
    return " (warm: " + ("the compiled forward loaded" if s.get("compile_loaded") else
                         "Dynamo traced, Inductor's code from the compile cache") + ")"


def runtime_modes_line(by_kind: dict[str, dict[str, int]]) -> str:
    """'steps by runtime mode: decode FULL 15; mixed (prefill) NONE 1' (runner/records.runtime_modes_by_kind)."""
    names = {"decode": "decode", "mixed": "mixed (prefill)"}
    kinds = [f"{names.get(kind, kind)} " + ", ".join(f"{mode} {n}" for mode, n in modes.items())
             for kind, modes in by_kind.items()]
    return "steps by runtime mode: " + ("; ".join(kinds) or "none")


def variants_line(choice: dict) -> str:
    """The start-up's compile_sizes variant choice in one line ('' when the config compiles none)."""
    if not choice or choice.get("policy") == "none":
        return ""
    if choice.get("policy") != "measured":
        return f"compile_sizes variants: all kept, unmeasured ({choice.get('note') or choice.get('policy')})"
    parts = [f"{t['size']}: {t['kept']} ({t['static_ms']:.3f} vs {t['dynamic_ms']:.3f} ms)" for t in choice.get("sizes", [])]
    parts += [f"{size}: the traced pieces (graphbench's kernels)" for size in choice.get("piece_sizes", [])]
    return "compile_sizes variants (step with variants vs dynamic pieces), kept: " + ", ".join(parts)


def precompiled_note(precompiled: list) -> str:
    """' (N kernels compiled ahead in X s)' for a cold start's capture, '' otherwise."""
    count, seconds = precompiled
    return f" ({count} kernels compiled ahead in {seconds:.1f} s)" if count else ""


def kernel_choices_line(record: dict) -> str:
    """The projections' kernels in one line: how many of each were chosen, timed or loaded ('' on the CPU)."""
    if not record:
        return ""
    if record.get("source") == "rules" or not record.get("choices"):
        return "projection kernels: the rules (nothing timed without a compile-cache entry)"
    counts: dict[str, int] = {}
    folds = [c for c in record.get("choices", []) if str(c.get("op", "")).startswith("norm_")]
    for choice in record.get("choices", []):
        if choice not in folds:
            counts[choice["kernel"]] = counts.get(choice["kernel"], 0) + 1
    kinds = ", ".join(f"{kernel} {n}" for kernel, n in sorted(counts.items()))
    if folds:  # at one row, the add-norm before qkv and gate/up: folded into the GEMV where that was clearly
        # faster (runner/norm_fold_timing.FOLD_MIN_GAIN)
        kinds += f"; add-norm folded into {sum(c['kernel'] != 'unfused' for c in folds)} of {len(folds)} one-row GEMVs"
    how = {"measured": "timed", "loaded": "loaded", "shared": "loaded as this GPU timed them for another config"}
    if record.get("search"):  # (model.kernel_search: a sweep round's own search, bench/round_searches.py)
        how = {**how, "shared": f"loaded from the search {record['search']}",
               "measured": f"timed (the search {record['search']} was not stored)"}
    source = record.get("source")
    if source not in how:
        return f"projection kernels ({kinds}): as an earlier engine of this process timed them"
    return f"projection kernels ({kinds}): {how[source]} in {record.get('seconds', 0.0):.1f} s"


def _setup_note(startup: dict) -> str:
    """The part of graph memory the capture stream's cuBLAS setup takes, once (absent in older results)."""
    setup = startup.get("graph_setup_bytes") or 0
    return f"; of it {setup / GIB:.3f} GiB the capture stream's cuBLAS setup" if setup >= 2**20 else ""
