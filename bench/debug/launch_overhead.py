"""Host time of one kernel launch on the GPU: Triton's JIT path against a direct launch (issue 5).

    python bench/debug/launch_overhead.py

The eager (NONE) prefill steps of the C = 64 sweep are host-bound (~7.5 ms of launches for ~6.9 ms of
GPU work, session 6) and make the spread between repeats. About 80 of their launches are
graphbench's own Triton kernels, each through `JITFunction.run` (binder, cache key, stream and device
lookups, hooks) before the C launcher. This measures what that path costs per launch against calling
the compiled kernel's launcher directly, with the add-norm kernel at a prefill chunk's shape (2048 rows
x 2048, bf16), and puts a cuBLAS launch and a plain torch op beside them for scale. If the difference
is several microseconds, runner/launch.py's cached direct launcher (GRAPHBENCH_DIRECT_LAUNCH=1, measured
here through the engine's wrapper too) is worth turning on.

Each figure: 200 launches timed on the host clock (the GPU keeps up: the queue never fills), then a
sync; the median over 30 such rounds, microseconds per launch.
"""

from __future__ import annotations

import json
import statistics
import time


def per_launch_us(launch, rounds: int = 30, number: int = 200) -> float:
    import torch

    for _ in range(number):
        launch()
    torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            launch()
        samples.append((time.perf_counter() - start) / number * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def main() -> None:
    import torch

    from graphbench.runner.device import next_power_of_2
    from graphbench.runner.norm_kernels import _add_rmsnorm_kernel, launch_add_rmsnorm

    rows, k = 2048, 2048
    x, residual = (torch.randn(rows, k, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    weight = torch.randn(k, device="cuda", dtype=torch.bfloat16)
    out, h_out = torch.empty_like(x), torch.empty_like(x)
    block = next_power_of_2(k)
    args = (x, residual, weight, out, h_out, k, x.stride(0), residual.stride(0), 1e-5)
    meta = dict(BLOCK=block, PDL=False, num_warps=4)

    def wrapper():
        launch_add_rmsnorm(x, residual, weight, 1e-5, out, h_out)

    def jit():
        _add_rmsnorm_kernel[(rows,)](*args, **meta)

    compiled = _add_rmsnorm_kernel.warmup(*args, grid=(rows,), **meta)
    compiled.run  # loads the module and builds the launcher
    constexprs = [meta["BLOCK"], meta["PDL"]]  # the kernel's constexpr parameters, in signature order
    stream = torch.cuda.current_stream().cuda_stream

    def direct():
        compiled.run(rows, 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None,
                     *args, *constexprs)

    # correctness of the direct launch: the same output as the JIT launch
    jit()
    expected = out.clone()
    out.zero_()
    direct()
    torch.cuda.synchronize()
    same = bool(torch.equal(out, expected))

    a, w16 = torch.randn(16, k, device="cuda", dtype=torch.bfloat16), torch.randn(k, k, device="cuda", dtype=torch.bfloat16)
    from graphbench.runner import launch, norm_kernels

    launch.DIRECT_LAUNCH = False  # the engine's wrapper through Triton's JIT path (GRAPHBENCH_DIRECT_LAUNCH=0)
    figures = {"add_rmsnorm via launch_add_rmsnorm (engine's wrapper), GRAPHBENCH_DIRECT_LAUNCH=0": per_launch_us(wrapper)}
    # the engine's wrapper again, through runner/launch.py's cached direct launch (the default)
    launch.DIRECT_LAUNCH = True
    out.zero_()
    wrapper()
    wrapper()  # the second launch with this key is a direct one
    torch.cuda.synchronize()
    same_cached = bool(torch.equal(out, expected)) and norm_kernels._add_rmsnorm_launch.num_direct > 0
    figures["add_rmsnorm via launch_add_rmsnorm (engine's wrapper), GRAPHBENCH_DIRECT_LAUNCH=1"] = per_launch_us(wrapper)
    launch.DIRECT_LAUNCH = False
    figures |= {
        "add_rmsnorm via kernel[grid](...) (JITFunction.run)": per_launch_us(jit),
        "add_rmsnorm via CompiledKernel.run (direct)": per_launch_us(direct),
        "torch.nn.functional.linear 16 x 2048 x 2048 (cuBLAS)": per_launch_us(lambda: torch.nn.functional.linear(a, w16)),
        "torch.add of two 2048 x 2048 (one aten launch)": per_launch_us(lambda: torch.add(x, residual)),
    }
    # The eager prefill step's cuBLAS launches at llama-3.2-1b's projection shapes (qkv, o, gate_up, down):
    # stack samples put ~59% of an eager 2048-token step's host time in F.linear (session 8), far more
    # than the 12 us of the 16-row launch above. Few launches a round, so the queue never fills and
    # the host clock holds launch time only (each GEMM takes 20-400 us on the GPU).
    for rows in (2048, 8192):
        act = torch.randn(rows, 8192, device="cuda", dtype=torch.bfloat16)
        for n, k_in, name in ((3072, 2048, "qkv"), (2048, 2048, "o"), (16384, 2048, "gate_up"), (2048, 8192, "down")):
            w_proj = torch.randn(n, k_in, device="cuda", dtype=torch.bfloat16)
            a_proj = act[:, :k_in].contiguous()
            figures[f"F.linear {rows} x {k_in} -> {n} ({name}, cuBLAS, 8 launches a round)"] = per_launch_us(
                lambda a_proj=a_proj, w_proj=w_proj: torch.nn.functional.linear(a_proj, w_proj), rounds=20, number=8)
    import triton

    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    print(f"direct launch gives the JIT launch's output: {same}; the cached launcher's: {same_cached}")
    for name, us in figures.items():
        print(f"{us:8.2f} us  {name}")
    print(json.dumps({"direct_output_matches": same, "cached_output_matches": same_cached, "us_per_launch": figures}))


if __name__ == "__main__":
    main()
