"""Probe: the one-row MLP in one launch, split over the intermediate rows, against the engine's two launches.

At one row the engine runs the MLP as two kernels: the gated GEMV (gate/up with silu * up in its epilogue) and
the down GEMV, with a kernel boundary and the activation's round trip between them. Here program p owns
intermediate rows [p * BLOCK_I, (p + 1) * BLOCK_I): it computes their activation from its own gate/up rows,
multiplies it with its own columns of down's weight and adds the partial output into a fixed-point int64
accumulator (integer adds: the sum is the same in any order, so the output is deterministic). The last program
to finish (an arrival count) turns the accumulator into the bf16 output and zeroes it for the next launch. No
grid barrier: no program waits for another.

    python benchmarks/probes/mlp_split.py --check            # CPU: the kernel against torch (Triton interpreter)
    python benchmarks/probes/mlp_split.py --out mlp.json     # GPU: us a layer, a chain of layers in a CUDA graph
                                                              # with PDL, the engine's two kernels (their blocks
                                                              # chosen by start-up's search) against the fused
                                                              # kernel's best blocks, per model shape

A probe: its finding goes to benchmarks/RESULTS.md, then it leaves the tree (the kernel moves into
src/graphbench/runner/kernels/ only if it wins in the step).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

SHAPES = {"qwen2.5-0.5b": (896, 4864), "smollm2-135m": (576, 1536), "llama-3.2-1b": (2048, 8192),
          "llama-3.1-8b": (4096, 14336)}  # (hidden, intermediate); the first two are the targets left
FIXED_POINT_BITS = 24  # the accumulator's fraction: range +-5e11, resolution 6e-8 (bf16 outputs keep 8 bits);
# a NaN partial becomes 0 here where the two launches would pass it on (a probe's simplification)


if "--check" in sys.argv:  # the interpreter must be on before Triton is imported
    os.environ["TRITON_INTERPRET"] = "1"

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from graphbench.runner.kernels.pdl import pdl_enter  # noqa: E402

@triton.jit
def mlp_split_kernel(x_ptr, wgu_ptr, wd_ptr, acc_ptr, count_ptr, y_ptr, I, K, H, SCALE,
                     BLOCK_I: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr,
                     PDL: tl.constexpr = False):
    offs_i = tl.program_id(0) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = offs_i < I
    offs_k = tl.arange(0, BLOCK_K)
    offs_h = tl.arange(0, BLOCK_H)
    gate_rows = offs_i.to(tl.int64)[:, None] * K
    up_rows = (offs_i + I).to(tl.int64)[:, None] * K
    first_mask = i_ok[:, None] & (offs_k < K)[None, :]
    # weights before the PDL wait (no kernel writes them): the first gate/up tiles and down's first tile
    g_tile = tl.load(wgu_ptr + gate_rows + offs_k[None, :], mask=first_mask, other=0.0)
    u_tile = tl.load(wgu_ptr + up_rows + offs_k[None, :], mask=first_mask, other=0.0)
    d_first = tl.load(wd_ptr + offs_h.to(tl.int64)[:, None] * I + offs_i[None, :],
                      mask=(offs_h < H)[:, None] & i_ok[None, :], other=0.0)
    pdl_enter(PDL)
    x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0).to(tl.float32)
    gate = g_tile.to(tl.float32) * x[None, :]
    up = u_tile.to(tl.float32) * x[None, :]
    for k0 in range(BLOCK_K, K, BLOCK_K):
        ks = k0 + offs_k
        mask = i_ok[:, None] & (ks < K)[None, :]
        g_tile = tl.load(wgu_ptr + gate_rows + ks[None, :], mask=mask, other=0.0)
        u_tile = tl.load(wgu_ptr + up_rows + ks[None, :], mask=mask, other=0.0)
        x = tl.load(x_ptr + ks, mask=ks < K, other=0.0).to(tl.float32)
        gate += g_tile.to(tl.float32) * x[None, :]
        up += u_tile.to(tl.float32) * x[None, :]
    dtype = y_ptr.dtype.element_ty
    g = tl.sum(gate, axis=1).to(dtype).to(tl.float32)  # rounded as the gate/up output is in the engine
    u = tl.sum(up, axis=1).to(dtype).to(tl.float32)
    act = (g * tl.sigmoid(g) * u).to(dtype).to(tl.float32)  # and the activation
    act = tl.where(i_ok, act, 0.0)
    part = tl.sum(d_first.to(tl.float32) * act[None, :], axis=1)
    tl.atomic_add(acc_ptr + offs_h, tl.floor(part * SCALE + 0.5).to(tl.int64), mask=offs_h < H, sem="relaxed")
    for h0 in range(BLOCK_H, H, BLOCK_H):
        hs = h0 + offs_h
        d_tile = tl.load(wd_ptr + hs.to(tl.int64)[:, None] * I + offs_i[None, :],
                         mask=(hs < H)[:, None] & i_ok[None, :], other=0.0)
        part = tl.sum(d_tile.to(tl.float32) * act[None, :], axis=1)
        tl.atomic_add(acc_ptr + hs, tl.floor(part * SCALE + 0.5).to(tl.int64), mask=hs < H, sem="relaxed")
    # the last program to arrive (acq_rel: every program's adds before its arrival are visible to it; the
    # barrier first, so that every thread's adds come before the program's arrival)
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel")
    if arrived == tl.num_programs(0) - 1:
        for h0 in range(0, H, BLOCK_H):
            hs = h0 + offs_h
            total = tl.atomic_xchg(acc_ptr + hs, tl.zeros([BLOCK_H], dtype=tl.int64), mask=hs < H, sem="relaxed")
            tl.store(y_ptr + hs, (total.to(tl.float32) / SCALE).to(dtype), mask=hs < H)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed")


class FusedMLP:
    """The fused kernel's launch and its state (the zeroed accumulator and arrival count it leaves behind)."""

    def __init__(self, kernel, hidden: int, device):
        import torch

        self.kernel = kernel
        self.acc = torch.zeros(hidden, dtype=torch.int64, device=device)
        self.count = torch.zeros(1, dtype=torch.int32, device=device)

    def __call__(self, x, wgu, wd, y, block_i: int, block_k: int, block_h: int, warps: int, warmup: bool = False):
        from graphbench.runner.kernels.pdl import pdl_arguments

        inter, hidden = wd.shape[1], wd.shape[0]
        grid = (-(-inter // block_i),)
        args = (x, wgu, wd, self.acc, self.count, y, inter, x.shape[-1], hidden, float(2 ** FIXED_POINT_BITS))
        options = dict(BLOCK_I=block_i, BLOCK_K=block_k, BLOCK_H=block_h, num_warps=warps, num_stages=1,
                       **pdl_arguments(y))
        if warmup:  # compile only
            return self.kernel.warmup(*args, grid=grid, **options)
        self.kernel[grid](*args, **options)

    def compile_all(self, x, wgu, wd, y, configs: list[tuple]) -> None:
        """Compile every config from several threads (Triton compiles mostly outside the GIL); one that does not
        compile is left to its launch to fail."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(len(configs), os.cpu_count() or 1, 16)) as pool:
            for future in [pool.submit(self, x, wgu, wd, y, *blocks, warmup=True) for blocks in configs]:
                try:
                    future.result()
                except Exception:  # noqa: BLE001 - its launch says why
                    pass


def reference(x, wgu, wd):
    """The engine's numerics: gate/up rounded to the dtype, the activation rounded, then down."""
    import torch.nn.functional as F

    gu = F.linear(x, wgu)
    inter = wd.shape[1]
    act = (F.silu(gu[:, :inter].float()) * gu[:, inter:].float()).to(x.dtype)
    return F.linear(act, wd)


def check() -> None:
    """On the CPU under the interpreter: odd and even shapes, twice in a row (the state left zeroed), against the
    engine's two kernels under the interpreter too (whose casts to bf16 truncate where a GPU rounds: both paths
    then stand ~1.5% from torch's, alike) and loosely against torch."""
    import torch

    from graphbench.runner.kernels import gemv

    kernel = mlp_split_kernel
    torch.manual_seed(0)
    for hidden, inter, blocks in ((96, 200, (16, 32, 32, 1)), (64, 128, (32, 64, 64, 1)), (40, 72, (8, 16, 16, 1))):
        x = torch.randn(1, hidden, dtype=torch.bfloat16)
        wgu = torch.randn(2 * inter, hidden, dtype=torch.bfloat16) / hidden ** 0.5
        wd = torch.randn(hidden, inter, dtype=torch.bfloat16) / inter ** 0.5
        fused = FusedMLP(kernel, hidden, "cpu")
        act = torch.empty(1, inter, dtype=torch.bfloat16)
        apart = torch.empty(1, hidden, dtype=torch.bfloat16)
        gemv.launch_gated_gemv(x, wgu, act, 8, 8, 1, interpret=True)
        gemv.launch_gemv(act, wd, None, apart, 8, 8, 1, interpret=True)
        ref = reference(x, wgu, wd).float()
        for _ in range(2):
            y = torch.empty(1, hidden, dtype=torch.bfloat16)
            fused(x, wgu, wd, y, *blocks)
            err = ((y.float() - apart.float()).norm() / apart.float().norm()).item()
            assert err < 5e-3, (hidden, inter, blocks, err)
            assert ((y.float() - ref).norm() / ref.norm()).item() < 3e-2
            assert int(fused.count.item()) == 0 and not fused.acc.any()
    print("ok")


def apart_blocks(hidden: int, inter: int, wgu, wd) -> tuple[tuple, tuple]:
    """The blocks start-up's search would choose for gate/up and down at one row (timed alone, as it does)."""
    from graphbench.runner import kernel_choice as kc
    from graphbench.runner.kernel_bench import ProjectionTimer, search

    chosen = []
    for op, kernel, weight, coarse in (("gate_up", "gated_gemv", wgu, kc.gated_gemv_candidates(2 * inter, hidden)),
                                       ("linear", "gemv", wd, kc.gemv_candidates(hidden, inter))):
        timer = ProjectionTimer(weight, None)
        found = search(lambda b: timer.time(op, kernel, b, 1), coarse,
                       lambda b, k=weight.shape[1]: kc.gemv_neighbours(b, k),
                       lambda blocks: timer.prepare(op, kernel, blocks, 1))
        chosen.append(found[0])
    return chosen[0], chosen[1]


def measure(model: str, layers: int) -> dict:
    """us a layer of the two paths, each a chain of `layers` layers (each its own weights, the output of one the
    input of the next) in one CUDA graph with PDL."""
    import torch

    from graphbench.runner.kernel_bench import graph_time_us
    from graphbench.runner.kernels import gemv
    from graphbench.runner.kernels.pdl import graph_launches

    hidden, inter = SHAPES[model]
    dev = "cuda"
    torch.manual_seed(0)
    wgus = [torch.randn(2 * inter, hidden, dtype=torch.bfloat16, device=dev) / hidden ** 0.5 for _ in range(layers)]
    wds = [torch.randn(hidden, inter, dtype=torch.bfloat16, device=dev) / inter ** 0.5 for _ in range(layers)]
    xs = [torch.randn(1, hidden, dtype=torch.bfloat16, device=dev) for _ in range(layers + 1)]
    act = torch.empty(1, inter, dtype=torch.bfloat16, device=dev)
    out: dict = {"model": model, "hidden": hidden, "intermediate": inter, "layers": layers}
    with graph_launches(), torch.no_grad():
        gu_blocks, d_blocks = apart_blocks(hidden, inter, wgus[0], wds[0])

        def apart(i):
            gemv.launch_gated_gemv(xs[i], wgus[i], act, *gu_blocks)
            gemv.launch_gemv(act, wds[i], None, xs[i + 1], *d_blocks)

        out["apart"] = {"gate_up_blocks": list(gu_blocks), "down_blocks": list(d_blocks),
                        "us": graph_time_us(apart, layers, replays=10, repeats=5)}
        ref = reference(xs[0], wgus[0], wds[0])
        fused = FusedMLP(mlp_split_kernel, hidden, dev)
        results = []
        configs = [(block_i, block_k, block_h, warps) for block_i in (16, 32, 64)  # (16: one 32-byte sector a row
                   for block_k in (128, 256) for block_h in (64, 128) for warps in (4, 8)]  # of down's weight)
        fused.compile_all(xs[0], wgus[0], wds[0], xs[1], configs)
        for blocks in configs:
            try:
                y = torch.empty(1, hidden, dtype=torch.bfloat16, device=dev)
                fused(xs[0], wgus[0], wds[0], y, *blocks)
                err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
                us = graph_time_us(lambda i: fused(xs[i], wgus[i], wds[i], xs[i + 1], *blocks), layers,
                                   replays=10, repeats=5)
            except Exception as exc:  # noqa: BLE001 - a config that does not compile (shared memory)
                results.append({"blocks": list(blocks), "error": str(exc)[:200]})
                continue
            results.append({"blocks": list(blocks), "us": us, "rel_err": err})
        ok = [r for r in results if "us" in r]
        out["fused"] = sorted(ok, key=lambda r: r["us"])[:8]
        out["fused_failed"] = len(results) - len(ok)
        if not ok:
            return out
        # the best fused config again, interleaved with the apart path (3 more times each)
        best = tuple(out["fused"][0]["blocks"])
        again = {"apart": [], "fused": []}
        for _ in range(3):
            again["apart"].append(graph_time_us(apart, layers, replays=10, repeats=5))
            again["fused"].append(graph_time_us(lambda i: fused(xs[i], wgus[i], wds[i], xs[i + 1], *best), layers,
                                                replays=10, repeats=5))
        out["again"] = again
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="the kernel against torch on the CPU (interpreter)")
    p.add_argument("--models", default=",".join(SHAPES))
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.check:
        check()
        return
    found = []
    for model in args.models.split(","):
        r = measure(model, args.layers)
        found.append(r)
        best = r["fused"][0] if r["fused"] else None
        print(f"{model}: apart {r['apart']['us']:.2f} us a layer (gate/up {r['apart']['gate_up_blocks']}, down "
              f"{r['apart']['down_blocks']}); fused best "
              + (f"{best['us']:.2f} ({best['blocks']}, rel err {best['rel_err']:.1e})" if best else "none ran")
              + (f"; again apart {'/'.join(f'{v:.2f}' for v in r['again']['apart'])}, fused "
                 + "/".join(f"{v:.2f}" for v in r["again"]["fused"]) if "again" in r else ""), flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(found, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
