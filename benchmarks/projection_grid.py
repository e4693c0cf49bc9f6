"""A one-row projection's GEMV blocks over a wide grid, beside cuBLAS: how fast a shape could run,
before start-up's candidates (runner/kernel_choice.gemv_candidates) are changed for it.

    python3 benchmarks/projection_grid.py --shape linear:896:4864 --shape gate_up:9728:896 --out grid.json

Each config is timed as start-up times its candidates (runner/kernel_bench.ProjectionTimer: PDL launches in a
CUDA graph, each on its own weight copy, together past the L2) and checked against F.linear. Prints the
fastest configs a shape with their share of the weight-bandwidth floor (--tbps)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def grid(n: int, k: int, gated: bool) -> list[tuple[int, ...]]:
    """(BLOCK_N, BLOCK_K, warps[, stages]): every K tile from 64 to the whole row, 1 to 64 rows a program
    (gate/up: columns, each a gate and an up row), 1 to 16 warps at 4 to 128 values a thread, and 2 and 3
    stages (tiles in flight) where the K loop runs several tiles."""
    from graphbench.runner.kernels.util import next_power_of_2

    tiles = [b for b in (64, 128, 256, 512, 1024, 2048, 4096) if k % b == 0]
    if next_power_of_2(k) not in tiles:
        tiles.append(next_power_of_2(k))
    out = []
    for block_k in tiles:
        for block_n in (1, 2, 4, 8, 16, 32, 64):
            values = block_n * block_k * (2 if gated else 1)
            if not 256 <= values <= 32768 or (gated and block_n > n // 2):
                continue
            for warps in (1, 2, 4, 8, 16):
                if 4 <= values // (32 * warps) <= 128:
                    out.append((block_n, block_k, warps))
                    if k > block_k:
                        out += [(block_n, block_k, warps, s) for s in (2, 3)]
    return out


def time_shape(op: str, n: int, k: int, tbps: float, top: int) -> dict:
    import torch
    import torch.nn.functional as F

    from graphbench.runner.kernel_bench import ProjectionTimer, compile_all, launcher
    from graphbench.runner.kernels.pdl import graph_launches

    weight = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") / k**0.5
    timer = ProjectionTimer(weight, None)
    kernel = "gated_gemv" if op == "gate_up" else "gemv"
    configs = grid(n, k, op == "gate_up")
    x = torch.randn(1, k, dtype=torch.bfloat16, device="cuda")
    reference = F.linear(x, weight).float()
    if op == "gate_up":
        gate, up = reference.chunk(2, dim=1)
        reference = (F.silu(gate.bfloat16().float()) * up.bfloat16().float())
    floor_us = n * k * 2 / (tbps * 1e6)
    started = time.perf_counter()
    with graph_launches(), torch.no_grad():
        compile_all([lambda b=b: launcher(op, kernel, b, x, None)(weight) for b in configs])
        compiled = time.perf_counter() - started
        rows = [{"kernel": "torch", "blocks": [], "us": timer.time(op, "torch", (), 1), "max_abs_err": 0.0}]
        for blocks in configs:
            try:
                err = (launcher(op, kernel, blocks, x, None)(weight).float() - reference).abs().max().item()
            except Exception as exc:  # noqa: BLE001 - a config this GPU cannot run
                print(f"  {op} {n}x{k} {blocks}: {type(exc).__name__}", flush=True)
                continue
            rows.append({"kernel": kernel, "blocks": list(blocks), "us": timer.time(op, kernel, blocks, 1),
                         "max_abs_err": err})
    rows = sorted((r for r in rows if r["us"] is not None), key=lambda r: r["us"])
    print(f"{op} {n}x{k}: {len(configs)} configs (compiled in {compiled:.0f} s), floor {floor_us:.2f} us at {tbps} TB/s; "
          f"cuBLAS {next(r['us'] for r in rows if r['kernel'] == 'torch'):.2f} us", flush=True)
    for r in rows[:top]:
        print(f"  {r['kernel']:>10} {str(tuple(r['blocks'])):<20} {r['us']:7.2f} us  {floor_us / r['us']:5.1%} of floor"
              f"  max err {r['max_abs_err']:.3g}", flush=True)
    return {"op": op, "n": n, "k": k, "floor_us": floor_us, "configs": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", action="append", required=True, help="op:N:K (op: linear or gate_up)")
    parser.add_argument("--tbps", type=float, default=4.8, help="the weight-bandwidth floor's TB/s (H200: 4.8)")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    shapes = []
    for spec in args.shape:
        op, n, k = spec.split(":")
        if op not in ("linear", "gate_up"):
            parser.error(f"--shape {spec}: op is linear or gate_up")
        shapes.append((op, int(n), int(k)))
    results = [time_shape(op, n, k, args.tbps, args.top) for op, n, k in shapes]
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
