"""Probe: o -> residual add + RMSNorm -> gate/up in one launch whose row blocks overlap, against the three launches.

The question before a persistent layer kernel (docs/DEVELOPING.md, SmolLM2's batch-64 step): does one launch in
which the gate/up tiles of a row block start as soon as that row block's o tiles are done (a per-row-block count,
no grid barrier) beat the engine's three PDL-chained launches (skinny o, add-norm, gated skinny gate/up)?
Programs [0, P) compute o's tiles (row block, column block) and store h = o + residual; programs from P wait on
their row block's count, normalise its h rows and compute their gate/up columns. Rows 64 in blocks of ROWS.

  python3 benchmarks/probe_two_phase.py [--hidden 576 --inter 1536 --heads-dim 576 --rows 64 --layers 30]
Prints each form's us per layer (a graph of `layers` layers on weight copies past the L2) and its ratio to the
three launches. Correctness against torch first (bf16, tolerance of a bf16 GEMM).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import triton
import triton.language as tl

from graphbench.runner.kernels.pdl import pdl_arguments, pdl_enter, graph_launches


@triton.jit
def _two_phase(a_ptr, wo_ptr, r_ptr, h_ptr, nw_ptr, wgu_ptr, y_ptr, ready_ptr, done_ptr, M, eps,
               KO: tl.constexpr, H: tl.constexpr, I: tl.constexpr, ROWS: tl.constexpr, BN_A: tl.constexpr,
               BN_B: tl.constexpr, BK: tl.constexpr, PDL: tl.constexpr = False):
    pid = tl.program_id(0)
    num_a = tl.cdiv(M, ROWS) * (H // BN_A)
    pdl_enter(PDL)
    if pid < num_a:
        _phase_a(pid, a_ptr, wo_ptr, r_ptr, h_ptr, ready_ptr, M, KO, H, ROWS, BN_A, BK)
    else:
        _phase_b(pid - num_a, h_ptr, nw_ptr, wgu_ptr, y_ptr, ready_ptr, done_ptr, M, eps, H, I, ROWS, BN_A, BN_B, BK)


@triton.jit
def _phase_a(pid, a_ptr, wo_ptr, r_ptr, h_ptr, ready_ptr, M, KO: tl.constexpr, H: tl.constexpr,
             ROWS: tl.constexpr, BN_A: tl.constexpr, BK: tl.constexpr):
    """h[rows, cols] = (a @ wo.T)[rows, cols] + r, then count the row block's tile done."""
    A_PER_RB: tl.constexpr = H // BN_A
    rb = pid // A_PER_RB
    offs_k = tl.arange(0, BK)
    offs_m = rb * ROWS + tl.arange(0, ROWS)
    offs_n = (pid % A_PER_RB) * BN_A + tl.arange(0, BN_A)
    m_ok = offs_m < M
    acc = tl.zeros([ROWS, BN_A], dtype=tl.float32)
    for k0 in tl.range(0, KO, BK):
        x = tl.load(a_ptr + offs_m[:, None] * KO + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0)
        w = tl.load(wo_ptr + offs_n[None, :] * KO + (k0 + offs_k)[:, None])
        acc = tl.dot(x, w, acc)
    offs = offs_m[:, None] * H + offs_n[None, :]
    r = tl.load(r_ptr + offs, mask=m_ok[:, None], other=0.0).to(tl.float32)
    h = (acc.to(h_ptr.dtype.element_ty).to(tl.float32) + r).to(h_ptr.dtype.element_ty)
    tl.store(h_ptr + offs, h, mask=m_ok[:, None])
    tl.debug_barrier()
    tl.atomic_add(ready_ptr + rb, 1, sem="release", scope="gpu")


@triton.jit
def _phase_b(q, h_ptr, nw_ptr, wgu_ptr, y_ptr, ready_ptr, done_ptr, M, eps, H: tl.constexpr, I: tl.constexpr,
             ROWS: tl.constexpr, BN_A: tl.constexpr, BN_B: tl.constexpr, BK: tl.constexpr):
    """Wait for the row block's h, normalise it, compute gate/up's columns and the activation."""
    A_PER_RB: tl.constexpr = H // BN_A
    B_PER_RB: tl.constexpr = I // BN_B
    rb = q // B_PER_RB
    offs_k = tl.arange(0, BK)
    offs_m = rb * ROWS + tl.arange(0, ROWS)
    offs_n = (q % B_PER_RB) * BN_B + tl.arange(0, BN_B)
    m_ok = offs_m < M
    seen = tl.atomic_add(ready_ptr + rb, 0, sem="acquire", scope="gpu")
    while seen < A_PER_RB:
        seen = tl.atomic_add(ready_ptr + rb, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()
    sq = tl.zeros([ROWS], dtype=tl.float32)
    for k0 in tl.range(0, H, BK):
        hk = tl.load(h_ptr + offs_m[:, None] * H + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0,
                     cache_modifier=".cg").to(tl.float32)
        sq += tl.sum(hk * hk, axis=1)
    rstd = 1.0 / tl.sqrt(sq / H + eps)
    gate = tl.zeros([ROWS, BN_B], dtype=tl.float32)
    up = tl.zeros([ROWS, BN_B], dtype=tl.float32)
    for k0 in tl.range(0, H, BK):
        hk = tl.load(h_ptr + offs_m[:, None] * H + (k0 + offs_k)[None, :], mask=m_ok[:, None], other=0.0,
                     cache_modifier=".cg").to(tl.float32)
        nw = tl.load(nw_ptr + k0 + offs_k).to(tl.float32)
        x = ((hk * rstd[:, None]).to(y_ptr.dtype.element_ty).to(tl.float32) * nw[None, :]).to(y_ptr.dtype.element_ty)
        wg = tl.load(wgu_ptr + offs_n[None, :] * H + (k0 + offs_k)[:, None])
        wu = tl.load(wgu_ptr + (offs_n + I)[None, :] * H + (k0 + offs_k)[:, None])
        gate = tl.dot(x, wg, gate)
        up = tl.dot(x, wu, up)
    gate = gate.to(y_ptr.dtype.element_ty).to(tl.float32)
    up = up.to(y_ptr.dtype.element_ty).to(tl.float32)
    tl.store(y_ptr + offs_m[:, None] * I + offs_n[None, :], (gate * tl.sigmoid(gate) * up).to(y_ptr.dtype.element_ty),
             mask=m_ok[:, None])
    # the last consumer of the row block zeroes its counts for the next launch
    if tl.atomic_add(done_ptr + rb, 1, sem="acq_rel", scope="gpu") == B_PER_RB - 1:
        tl.atomic_xchg(ready_ptr + rb, 0, sem="relaxed", scope="gpu")
        tl.atomic_xchg(done_ptr + rb, 0, sem="relaxed", scope="gpu")


def two_phase(a, wo, r, nw, wgu, eps, rows, bn_a, bn_b, warps, stages, counts):
    m, ko = a.shape
    hidden, inter = wo.shape[0], wgu.shape[0] // 2
    h = torch.empty((m, hidden), dtype=a.dtype, device=a.device)
    y = torch.empty((m, inter), dtype=a.dtype, device=a.device)
    num_rb = -(-m // rows)
    grid = (num_rb * (hidden // bn_a) + num_rb * (inter // bn_b),)
    _two_phase[grid](a, wo, r, h, nw, wgu, y, counts[0], counts[1], m, eps, KO=ko, H=hidden, I=inter, ROWS=rows,
                     BN_A=bn_a, BN_B=bn_b, BK=64, num_warps=warps, num_stages=stages, **pdl_arguments(y))
    return h, y


def reference(a, wo, r, nw, wgu, eps):
    dtype = a.dtype
    o = (a @ wo.T).float()
    h = (o + r.float()).to(dtype)
    hf = h.float()
    rstd = torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + eps)
    x = ((hf * rstd).to(dtype).float() * nw.float()).to(dtype)
    gu = (x @ wgu.T).float()
    inter = wgu.shape[0] // 2
    gate, up = gu[:, :inter].to(dtype).float(), gu[:, inter:].to(dtype).float()
    return h, (gate * torch.sigmoid(gate) * up).to(dtype)


def three_launches(a, wo, r, nw, wgu, eps, o_cfg, gu_cfg):
    from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
    from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm
    o = skinny_gemm(a, wo, None, o_cfg)
    h, x = torch.empty_like(o), torch.empty_like(o)
    launch_add_rmsnorm(o, r, nw, eps, x, h)
    return h, skinny_gate_up(x, wgu, gu_cfg)


def layer_graph_us(call, layers, repeats=7, replays=20):
    """us per layer of a graph of `layers` calls (call(i): layer i's weights), launched as the engine captures."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with graph_launches(), torch.cuda.stream(stream):
        for i in range(layers):
            call(i)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(layers):
                call(i)
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / (replays * layers))
    return statistics.median(samples)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--hidden", type=int, default=576)
    p.add_argument("--inter", type=int, default=1536)
    p.add_argument("--heads-dim", type=int, default=576)
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--layers", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    dev, dt, eps = "cuda", torch.bfloat16, 1e-5
    torch.manual_seed(0)
    L, H, I, KO, M = args.layers, args.hidden, args.inter, args.heads_dim, args.rows
    wos = [torch.randn(H, KO, device=dev, dtype=dt) / KO ** 0.5 for _ in range(L)]
    wgus = [torch.randn(2 * I, H, device=dev, dtype=dt) / H ** 0.5 for _ in range(L)]
    nws = [1 + 0.1 * torch.randn(H, device=dev, dtype=dt) for _ in range(L)]
    a = torch.randn(M, KO, device=dev, dtype=dt)
    r = torch.randn(M, H, device=dev, dtype=dt)
    counts = (torch.zeros(64, dtype=torch.int32, device=dev), torch.zeros(64, dtype=torch.int32, device=dev))

    from graphbench.runner.kernel_choice import (gated_skinny_candidates, gated_skinny_neighbours,
                                                 skinny_candidates, skinny_neighbours)
    from graphbench.runner.kernel_bench import graph_time_us
    from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # the three launches' blocks: each kernel's fastest alone, as start-up's search finds them
    def best(cands, run):
        timed = {c: graph_time_us(lambda i, c=c: run(i, c), L) for c in cands}
        return min(timed, key=timed.get), timed
    o_best, _ = best(skinny_candidates(H, KO, sms), lambda i, c: skinny_gemm(a, wos[i], None, c))
    o_best, _ = best([o_best, *skinny_neighbours(o_best, KO)], lambda i, c: skinny_gemm(a, wos[i], None, c))
    xn = torch.randn(M, H, device=dev, dtype=dt)
    gu_best, _ = best(gated_skinny_candidates(H), lambda i, c: skinny_gate_up(xn, wgus[i], c))
    gu_best, _ = best([gu_best, *gated_skinny_neighbours(gu_best)], lambda i, c: skinny_gate_up(xn, wgus[i], c))
    print(f"three launches: o blocks {o_best}, gate/up blocks {gu_best}", flush=True)

    want_h, want_y = reference(a, wos[0], r, nws[0], wgus[0], eps)
    forms = {"three launches": lambda i: three_launches(a, wos[i], r, nws[i], wgus[i], eps, o_best, gu_best)}
    for rows in (16, 32, 64):
        for bn_a in (32, 64):
            for bn_b in (16, 32):
                for warps, stages in ((4, 3), (4, 2)):
                    cfg = (rows, bn_a, bn_b, warps, stages)
                    forms[f"one launch {cfg}"] = (lambda i, cfg=cfg: two_phase(a, wos[i], r, nws[i], wgus[i], eps,
                                                                                 *cfg, counts))
    bad = []
    for name, call in forms.items():
        h, y = call(0)
        torch.cuda.synchronize()
        if not (torch.allclose(h.float(), want_h.float(), atol=2e-2, rtol=2e-2)
                and torch.allclose(y.float(), want_y.float(), atol=3e-2, rtol=3e-2)):
            bad.append(name)
            print(f"WRONG {name}: h err {(h.float() - want_h.float()).abs().max():.3g}, "
                  f"y err {(y.float() - want_y.float()).abs().max():.3g}", flush=True)
    times = {name: [] for name in forms if name not in bad}
    for _ in range(args.rounds):  # interleaved rounds
        for name in times:
            times[name].append(layer_graph_us(forms[name], L))
    base = statistics.median(times["three launches"])
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}; "
          f"rows {M}, hidden {H}, inter {I}, o K {KO}; us per layer (median of {args.rounds} rounds)")
    for name, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        med = statistics.median(ts)
        print(f"{name:40s} {med:7.2f} us  x{med / base:.3f}  rounds {' '.join(f'{t:.2f}' for t in ts)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
