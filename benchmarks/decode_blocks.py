"""The decode kernel's blocks at a batch and context: a grid of (TILE_N, num_warps, num_stages, KV splits)
against the engine's rule (kernels/paged_decode.decode_config), each timed inside a CUDA graph.

    python benchmarks/decode_blocks.py --models llama-3.1-8b --batches 1,64 --contexts 168 --jobs 15 --out decode-blocks.json

The inputs are a uniform decode step as the engine launches it: one new token per request, its K/V
written by the kernel, rotary applied inside, the merge of splits in the kernel, 16-token blocks in a
shuffled block table. Each launch of a graph reads its own layer's cache (copies used in turn, >= 120 MiB
of K/V in all), so the context streams from memory as in a step, not from L2. Without PDL: per-kernel
times (benchmarks/roofline.py says why). With --jobs N the grid's kernels are first compiled by N processes at
once, into Triton's cache, which the timing process then loads from.
"""

from __future__ import annotations

import argparse
import itertools
import json

BLOCK_SIZE = 16


def grid(args: argparse.Namespace) -> list[dict]:
    """The grid's configs (MIN_TILES only with a split count above 1, where the kernel merges)."""
    ints = lambda text: [int(v) for v in text.split(",") if v]  # noqa: E731
    configs = []
    for tile_n, warps, stages, splits, min_tiles in itertools.product(
            ints(args.tile_n), ints(args.warps), ints(args.stages), ints(args.splits), ints(args.min_tiles)):
        config = {"TILE_N": tile_n, "num_warps": warps, "num_stages": stages, "NUM_SPLITS": splits}
        if splits > 1:
            config["MIN_TILES"] = min_tiles
        if config not in configs:
            configs.append(config)
    return configs


def make_step(model: str, batch: int, context: int, seed: int = 0):
    """(launch(i, blocks), number of layer copies): one decode kernel call over layer copy i."""
    import torch

    from graphbench.config import load_arch
    from graphbench.runner.kernels.paged_decode import paged_decode
    from graphbench.runner.rope import RotaryEmbedding

    arch = load_arch(model)
    heads, kv_heads, head_dim = arch.num_attention_heads, arch.num_key_value_heads, arch.head_dim
    gen = torch.Generator(device="cuda").manual_seed(seed)
    dev, dtype = "cuda", torch.bfloat16
    blocks_per_seq = -(-context // BLOCK_SIZE)
    num_blocks = batch * blocks_per_seq
    layer_bytes = 2 * num_blocks * BLOCK_SIZE * kv_heads * head_dim * 2
    copies = min(64, max(2, -(-120 * 2**20 // layer_bytes)))
    caches = [(torch.randn(num_blocks, BLOCK_SIZE, kv_heads, head_dim, generator=gen, device=dev, dtype=dtype),
               torch.randn(num_blocks, BLOCK_SIZE, kv_heads, head_dim, generator=gen, device=dev, dtype=dtype))
              for _ in range(copies)]
    order = torch.randperm(num_blocks, generator=gen, device=dev).to(torch.int32)
    block_tables = order.view(batch, blocks_per_seq).contiguous()  # [batch, blocks a sequence]
    seq_lens = torch.full((batch,), context, dtype=torch.int32, device=dev)
    query_start_loc = torch.arange(batch + 1, dtype=torch.int32, device=dev)
    last = context - 1
    slots = (block_tables[:, last // BLOCK_SIZE].long() * BLOCK_SIZE + last % BLOCK_SIZE)  # [batch]
    q = torch.randn(batch, heads, head_dim, generator=gen, device=dev, dtype=dtype)
    k = torch.randn(batch, kv_heads, head_dim, generator=gen, device=dev, dtype=dtype)
    v = torch.randn(batch, kv_heads, head_dim, generator=gen, device=dev, dtype=dtype)
    with torch.device(dev):
        cos_sin = RotaryEmbedding(head_dim, context + 1, arch.rope_theta, None).cos_sin.to(dtype)
    out = torch.empty_like(q)
    scale = head_dim ** -0.5

    def launch(i: int, blocks: dict | None) -> torch.Tensor:
        k_cache, v_cache = caches[i % copies]
        paged_decode(q, k_cache, v_cache, out, query_start_loc, seq_lens, block_tables, scale,
                     (k, v, slots), cos_sin=cos_sin, blocks=blocks)
        return out

    return launch, copies


def compile_worker(jobs: list[list]) -> None:
    """Launch each (model, batch, context, blocks) once: Triton compiles it into its cache."""
    import torch

    steps = {}
    for model, batch, context, blocks in jobs:
        key = (model, batch, context)
        if key not in steps:
            steps[key] = make_step(model, batch, context)[0]
        try:
            steps[key](0, blocks)
        except Exception:  # noqa: BLE001 - a config this GPU cannot run: the timing pass reports it
            pass
    torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="llama-3.2-1b,llama-3.1-8b")
    p.add_argument("--batches", default="1,64")
    p.add_argument("--contexts", default="168", help="tokens in each request's cache, its new one included")
    p.add_argument("--tile-n", default="16,32,64,128")
    p.add_argument("--warps", default="2,4,8")
    p.add_argument("--stages", default="1,2,3,4")
    p.add_argument("--splits", default="1,2,4")
    p.add_argument("--min-tiles", default="1", help="the fewest KV tiles a split covers, with a split count > 1")
    p.add_argument("--jobs", type=int, default=1, help="processes compiling the grid before it is timed")
    p.add_argument("--out", default=None)
    p.add_argument("--compile-jobs", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.compile_jobs:
        compile_worker(json.loads(args.compile_jobs))
        return
    cases = [(m, int(b), int(c)) for m in args.models.split(",") for b in args.batches.split(",")
             for c in args.contexts.split(",")]
    from graphbench.runner.kernel_bench import graph_time_us
    from kernel_grid import precompile, time_grid

    if args.jobs > 1:
        precompile(__file__, [[m, b, c, blocks] for m, b, c in cases for blocks in grid(args)], args.jobs)

    results = []
    for model, batch, context in cases:
        launch, copies = make_step(model, batch, context)
        reference = launch(0, None).float().clone()
        rule_us = graph_time_us(lambda i: launch(i, None), copies)
        rows = time_grid(f"{model} batch {batch} context {context}", grid(args), launch, copies, reference,
                         f"rule {rule_us:.2f}")
        best = min(rows, key=lambda r: r["us"]) if rows else None
        results.append({"model": model, "batch": batch, "context": context, "rule_us": rule_us, "best": best,
                        "grid": rows})
        if best:
            print(f"{model} batch {batch} context {context}: best {best['config']} {best['us']:.2f} us against the "
                  f"rule's {rule_us:.2f} us ({rule_us / best['us']:.3f}x)", flush=True)
        if args.out:  # after each case: a time limit keeps what was measured
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
