"""Probe: a one-row GEMV split along K (each program one power-of-two chunk of K for BLOCK_N rows, every
weight loaded before the PDL wait; the last split of a column block to finish sums the float32 partials in
split order) against start-up's own search for the shape (kernel_timing._choose at one row), timed alike.

    python3 benchmarks/gemv_split_probe.py --shape 896:4864 --shape 2048:8192
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter
from graphbench.runner.kernels.util import next_power_of_2


@triton.jit
def _split_gemv(x_ptr, w_ptr, y_ptr, part_ptr, count_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr,
                CHUNK: tl.constexpr, SPLITS: tl.constexpr, SPLITS_P2: tl.constexpr, PDL: tl.constexpr = False):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = split * CHUNK + tl.arange(0, CHUNK)
    k_ok = offs_k < K
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
                mask=n_ok[:, None] & k_ok[None, :], other=0.0)
    pdl_enter(PDL)
    x = tl.load(x_ptr + offs_k, mask=k_ok, other=0.0).to(tl.float32)
    part = tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    if SPLITS == 1:
        tl.store(y_ptr + offs_n, part.to(y_ptr.dtype.element_ty), mask=n_ok)
    else:
        tl.store(part_ptr + split * N + offs_n, part, mask=n_ok)
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        tl.debug_barrier()
        if done == SPLITS - 1:
            offs_s = tl.arange(0, SPLITS_P2)
            parts = tl.load(part_ptr + offs_s[:, None] * N + offs_n[None, :],
                            mask=(offs_s < SPLITS)[:, None] & n_ok[None, :], other=0.0)
            tl.store(y_ptr + offs_n, tl.sum(parts, axis=0).to(y_ptr.dtype.element_ty), mask=n_ok)
            tl.atomic_xchg(count_ptr + pid_n, 0, sem="relaxed", scope="gpu")


def split_runner(x, n, k, block_n, chunk, warps):
    splits = -(-k // chunk)
    blocks = -(-n // block_n)
    part = torch.empty(splits, n, dtype=torch.float32, device=x.device)
    counts = torch.zeros(blocks, dtype=torch.int32, device=x.device)

    def run(w):
        out = x.new_empty((1, n))
        _split_gemv[(blocks, splits)](x, w, out, part, counts, n, k, w.stride(0), BLOCK_N=block_n, CHUNK=chunk,
                                      SPLITS=splits, SPLITS_P2=max(2, next_power_of_2(splits)), num_warps=warps,
                                      num_stages=1, **pdl_arguments(out))
        return out
    return run


def probe(n: int, k: int, tbps: float) -> dict:
    import torch.nn.functional as F

    from graphbench.runner.kernel_bench import ProjectionTimer
    from graphbench.runner.kernel_timing import _choose
    from graphbench.runner.kernels.paged_attention import sm_count
    from graphbench.runner.kernels.pdl import graph_launches

    weight = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k**0.5
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
    reference = F.linear(x, weight).float()
    floor = n * k * 2 / (tbps * 1e6)
    rows = []
    with graph_launches(), torch.no_grad():
        timer = ProjectionTimer(weight, None)
        engine = _choose("linear", timer, 1, sm_count(0))
        engine_us = timer.time("linear", engine.kernel, engine.blocks, 1)  # again, beside the split's timings
        whole = next_power_of_2(k) if next_power_of_2(k) != k else min(k, 4096)
        wide = {}  # the engine's GEMV over the whole row with fewer threads a program (more programs resident)
        for block_n, warps in itertools.product((1, 2, 4), (2, 4, 8)):
            if block_n * whole // (32 * warps) > 128:
                continue
            us = timer.time("linear", "gemv", (block_n, whole, warps), 1)
            if us is not None:
                wide[f"{block_n},{whole},{warps}"] = us
        print(f"{n}x{k}: engine GEMV, whole row: " + ", ".join(f"({b}) {u:.2f}" for b, u in sorted(wide.items(), key=lambda i: i[1])[:5]), flush=True)
        for block_n, chunk, warps in itertools.product((1, 2, 4, 8, 16), (128, 256, 512, 1024, 2048), (1, 2, 4, 8)):
            values = block_n * chunk
            if chunk > next_power_of_2(k) or not 4 <= values // (32 * warps) <= 64:
                continue
            run = split_runner(x, n, k, block_n, chunk, warps)
            try:
                err = (run(weight).float() - reference).abs().max().item()
            except Exception as exc:  # noqa: BLE001 - a config this GPU cannot run
                print(f"  {(block_n, chunk, warps)}: {type(exc).__name__}", flush=True)
                continue
            us = timer.time_run(run, f"split {(block_n, chunk, warps)}")
            if us is not None:
                rows.append({"blocks": [block_n, chunk, warps], "splits": -(-k // chunk), "us": us, "err": err})
    rows.sort(key=lambda r: r["us"])
    print(f"{n}x{k}: floor {floor:.2f} us; start-up's choice {engine.kernel} {engine.blocks} {engine.us:.2f} us "
          f"(again {engine_us:.2f}), cuBLAS {engine.torch_us:.2f}", flush=True)
    for r in rows[:8]:
        print(f"  split {tuple(r['blocks'])} x{r['splits']}: {r['us']:.2f} us ({floor / r['us']:.0%} of floor), "
              f"max err {r['err']:.3g}", flush=True)
    return {"n": n, "k": k, "floor_us": floor, "engine": engine.to_dict(), "engine_again_us": engine_us, "whole_row": wide,
            "split": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shape", action="append", required=True, help="N:K")
    parser.add_argument("--tbps", type=float, default=4.8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = [probe(*map(int, s.split(":")), args.tbps) for s in args.shape]
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
