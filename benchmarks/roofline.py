"""Roofline of one decode step: each kernel of the recorded graph, its bytes, time and the gap to the copy bandwidth.

    python benchmarks/roofline.py --model llama-3.2-1b --level 2 --batches 1,64 --out roofline.json

The engine records FULL_DECODE_ONLY graphs of exactly the timed batch sizes; each size's step (inputs,
the graph's replay, lm_head and greedy sampling) runs under torch.profiler several times. A step's
kernels, in launch order, are put in layer parts: the projections by their order within a layer
(qkv, o, gate/up, down; the last one is lm_head), the decode kernel (attention, K/V write included),
add-norm kernels (norms), the rest by name (rotary, silu-mul, sampling, other). Bytes are the fewest a
kernel must move (each weight and activation read once, each output written once; attention reads
the context's K and V); achieved TB/s is bytes over the kernel's median time, against a measured
device-to-device copy. The launch gaps are the idle time between consecutive kernels of the step.
Run it with GRAPHBENCH_PDL=0 for per-kernel times: with programmatic dependent launch a kernel starts
before the one it depends on ends and waits inside, so its span counts the wait (the sum of the spans
exceeds the step and the gaps vanish; benchmarks/RESULTS.md, 2026-12-01). The step is also timed unprofiled:
where the profiled kernels and gaps add up to more (batch 64 with cuBLAS: 1.69 against 1.25 ms,
2026-12-01), the profiler's own cost is in them.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

PROJECTIONS = ("qkv", "o", "gate/up", "down")
# (graphbench's gate/up GEMM with its activation is `_gated_kernel`)
PROJECTION_NAMES = ("gemv", "gemm", "skinny", "gated", "nvjet", "cutlass", "xmma", "matmul", "splitk", "sm90")


def part_of(name: str) -> str:
    low = name.lower()
    if "_shrink_kernel" in low and "rmsnorm" not in low or "_expand_kernel" in low:
        return "lora"  # LoRA's own launches (the add-norm that also shrinks stays with the norms)
    if "splitkreduce" in low:
        return "reduce"  # cuBLAS's split-K reduction: the second kernel of the projection before it
    if any(k in low for k in PROJECTION_NAMES) and "attention" not in low:
        return "projection"
    if "decode" in low or "attention" in low or "paged" in low:
        return "attention"
    if "embed" in low:
        return "embedding+norm"  # the first layer's norm with the embedding lookup (norms.py, or Inductor's fusion)
    if "rmsnorm" in low or "rsqrt" in low:
        return "norms"
    if "argmax" in low or "sample" in low:
        return "sampling"
    if "rotary" in low or "cat_index" in low or "split_with_sizes" in low:
        return "rotary"  # Inductor's fused rotary: cat of the rotated halves, indexed by position
    if "silu" in low:
        return "silu-mul"
    return "other"


def projection_bytes(arch, role: str, batch: int, elem: int = 2) -> int:
    h, q, kv, inter = arch.hidden_size, arch.num_attention_heads * arch.head_dim, \
        arch.num_key_value_heads * arch.head_dim, arch.intermediate_size
    shapes = {"qkv": (h, q + 2 * kv), "o": (q, h), "gate/up": (h, 2 * inter), "down": (inter, h),
              "lm_head": (h, arch.vocab_size)}
    k, n = shapes[role]
    return (k * n + batch * (k + n)) * elem


def other_bytes(arch, part: str, batch: int, context: int, elem: int = 2) -> int | None:
    h = arch.hidden_size
    kv = arch.num_key_value_heads * arch.head_dim
    if part == "attention":  # K and V of the context read, the new row written, q read, out written
        return batch * (2 * context * kv + 2 * kv + 2 * arch.num_attention_heads * arch.head_dim) * elem
    if part == "norms":  # x and residual read, both written, the weight read
        return (4 * batch * h + h) * elem
    if part == "silu-mul":
        return 3 * batch * arch.intermediate_size * elem
    if part == "rotary":  # q and k read and written
        return 2 * batch * (arch.num_attention_heads + arch.num_key_value_heads) * arch.head_dim * elem
    return None


def classify(kernels: list[dict], arch, batch: int, context: int) -> list[dict]:
    """Each kernel's part (projections by their order in the layer) and fewest bytes."""
    projection, role = 0, "other"
    num_proj = sum(1 for k in kernels if part_of(k["name"]) == "projection")
    for k in kernels:
        part = part_of(k["name"])
        if part == "projection":
            role = "lm_head" if projection == num_proj - 1 else PROJECTIONS[projection % 4]
            k["part"], k["bytes"] = role, projection_bytes(arch, role, batch)
            projection += 1
        elif part == "reduce":  # its bytes (fp32 partials) are not in the projection's fewest bytes
            k["part"], k["bytes"] = role, 0
        else:
            k["part"], k["bytes"] = part, other_bytes(arch, part, batch, context)
    return kernels


def profile_steps(engine, pool, batch: int, steps: int) -> list[list[dict]]:
    """Kernels (name, start us, duration us) of each profiled step, in launch order."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        engine.runner.launch(pool.batch(batch)).result()
    torch.cuda.synchronize()
    marks = []
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            torch.cuda.synchronize()
            engine.runner.launch(pool.batch(batch)).result()
            torch.cuda.synchronize()
            marks.append(None)
    kernels = sorted(({"name": e.name, "start": e.time_range.start, "us": e.time_range.elapsed_us()}
                      for e in prof.events() if e.device_type.name == "CUDA" and e.time_range.elapsed_us() > 0
                      and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()),
                     key=lambda k: k["start"])
    per_step = len(kernels) // steps
    if per_step * steps != len(kernels):
        raise SystemExit(f"{len(kernels)} kernels in {steps} steps: not the same kernels each step")
    return [kernels[i * per_step:(i + 1) * per_step] for i in range(steps)]


# the parts a decoder layer launches (the first layer's norm comes with the embedding lookup)
LAYER_PARTS = ("qkv", "o", "gate/up", "down", "attention", "norms", "rotary", "silu-mul", "embedding+norm", "lora")


def kernels_per_layer(kernels: list[dict], num_layers: int) -> float:
    """Kernels a decoder layer launches: those of the layer parts, less the final norm after the last layer
    (a small model's step is bound by this count times the time a kernel takes, not by its bytes)."""
    return (sum(1 for k in kernels if k["part"] in LAYER_PARTS) - 1) / num_layers


def summarise(steps: list[list[dict]], arch, batch: int, context: int, copy_gbs: float) -> dict:
    median_us = [statistics.median(s[i]["us"] for s in steps) for i in range(len(steps[0]))]
    gaps = [statistics.median(s[i + 1]["start"] - (s[i]["start"] + s[i]["us"]) for s in steps)
            for i in range(len(steps[0]) - 1)]
    kernels = classify([dict(k, us=u) for k, u in zip(steps[0], median_us)], arch, batch, context)
    return {"batch": batch, "kernels_per_step": len(kernels), "kernel_us": sum(median_us),
            "kernels_per_layer": kernels_per_layer(kernels, arch.num_hidden_layers),
            "launch_gaps_us": sum(g for g in gaps if g > 0), "parts": part_rows(kernels, copy_gbs),
            "kernels": kernel_rows(kernels)}


def kernel_rows(kernels: list[dict]) -> list[dict]:
    """The classified kernels as a result file keeps them."""
    return [{"name": k["name"], "part": k["part"], "us": k["us"], "bytes": k["bytes"]} for k in kernels]


def part_rows(kernels: list[dict], copy_gbs: float) -> list[dict]:
    """The classified kernels summed per layer part, slowest first, with bytes, TB/s and the floor."""
    parts: dict[str, dict] = defaultdict(lambda: {"kernels": 0, "us": 0.0, "bytes": 0, "bytes_known": True})
    for k in kernels:
        p = parts[k["part"]]
        p["kernels"] += 1
        p["us"] += k["us"]
        if k["bytes"] is None:
            p["bytes_known"] = False
        else:
            p["bytes"] += k["bytes"]
    rows = []
    for name, p in sorted(parts.items(), key=lambda kv: -kv[1]["us"]):
        floor_us = p["bytes"] / (copy_gbs * 1e3) if p["bytes_known"] else None
        rows.append({"part": name, "kernels": p["kernels"], "us": p["us"], "bytes": p["bytes"] if p["bytes_known"] else None,
                     "tb_s": p["bytes"] / p["us"] / 1e6 if p["bytes_known"] and p["us"] else None,
                     "floor_us": floor_us, "gap_us": p["us"] - floor_us if floor_us is not None else None})
    return rows


def reclassify(saved: dict) -> dict:
    """A saved run's tables again from its per-kernel medians (what a fix of part_of changes); the
    architecture from the model name, without loading it."""
    from graphbench.config import load_arch

    arch = load_arch(saved["model"])
    for r in saved["results"]:
        kernels = classify([dict(k) for k in r["kernels"]], arch, r["batch"], saved["context"])
        r["parts"] = part_rows(kernels, saved["copy_gbs"])
        r["kernels"] = kernel_rows(kernels)
    return saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="llama-3.2-1b", help="a preset or a checkpoint folder")
    p.add_argument("--load-format", default="auto", choices=["auto", "dummy", "safetensors"],
                   help="dummy: a checkpoint folder's shape with seeded random weights")
    p.add_argument("--level", type=int, default=2)
    p.add_argument("--batches", default="1,64")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--lora", default=None, metavar="SPEC",
                   help="load LoRA adapters (a lora.modules entry, e.g. dummy:r=16,n=4); the requests take them in turn")
    p.add_argument("--out", default=None)
    p.add_argument("--from", dest="saved", default=None, metavar="FILE",
                   help="print (and with --out rewrite) a saved run's tables from its kernels, with no GPU")
    args = p.parse_args()
    if args.saved:
        with open(args.saved) as f:
            saved = reclassify(json.load(f))
        print_tables(saved["results"], saved["copy_gbs"], saved["context"])
        if args.out:
            with open(args.out, "w") as f:
                json.dump(saved, f, indent=1)
        return
    from preflight import check_model_and_gpu

    check_model_and_gpu(args.model, args.load_format, "roofline.py")
    from decode_timing import copy_bandwidth_gbs
    from graphbench.bench.curve_measure import DecodePool
    from graphbench.config import load_engine_config
    from graphbench.runner.engine import Engine

    batches = [int(b) for b in args.batches.split(",")]
    copy_gbs = copy_bandwidth_gbs()
    overrides = {
        "model.model": args.model, "model.load_format": args.load_format, "optimization_level": args.level,
        "scheduler.max_num_seqs": max(batches), "compilation.cudagraph_mode": "FULL_DECODE_ONLY",
        "compilation.cudagraph_capture_sizes": batches, "compilation.max_cudagraph_capture_size": max(batches)}
    if args.lora:
        overrides["lora.modules"] = [args.lora]
    engine = Engine(load_engine_config(overrides=overrides))
    pool = DecodePool(engine, max(batches), adapters=list(engine.lora_slots))
    context = pool.contexts[-1]
    from graphbench.bench.curve_measure import measure_sizes

    # the same steps unprofiled (CUDA events, back to back): what the profiled kernels and gaps add up against
    unprofiled = measure_sizes(engine, pool, batches, warmup=10, timed=50)
    results = [summarise(profile_steps(engine, pool, b, args.steps), engine.arch, b, context, copy_gbs) for b in batches]
    for r in results:
        r["step_us_unprofiled"] = 1e3 * unprofiled[r["batch"]]["median_ms"]
    engine.close()
    print_tables(results, copy_gbs, context)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"model": args.model, "level": args.level, "lora": args.lora, "copy_gbs": copy_gbs,
                       "context": context, "results": results}, f, indent=1)


def print_tables(results: list[dict], copy_gbs: float, context: int) -> None:
    for r in results:
        per_layer = f" ({r['kernels_per_layer']:.1f} a layer)" if "kernels_per_layer" in r else ""
        print(f"\nbatch {r['batch']}: {r['kernels_per_step']} kernels{per_layer}, {r['kernel_us']:.1f} us of kernels + "
              f"{r['launch_gaps_us']:.1f} us of gaps between them; the step unprofiled {r['step_us_unprofiled']:.1f} us "
              f"(copy {copy_gbs / 1e3:.2f} TB/s, context {context})")
        print(f"{'part':<10}{'kernels':>8}{'us':>9}{'MB':>9}{'TB/s':>7}{'floor us':>10}{'gap us':>9}")
        for row in r["parts"]:
            known = row["bytes"] is not None
            print(f"{row['part']:<10}{row['kernels']:>8}{row['us']:>9.1f}"
                  + (f"{row['bytes'] / 1e6:>9.2f}{row['tb_s']:>7.2f}{row['floor_us']:>10.1f}{row['gap_us']:>9.1f}" if known
                     else f"{'-':>9}{'-':>7}{'-':>10}{'-':>9}"))


if __name__ == "__main__":
    from preflight import one_line_errors

    with one_line_errors():
        main()
