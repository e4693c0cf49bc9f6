"""Host-side costs of an eager launch path, measured on the CPU (no GPU needed).

    python bench/debug/host_overhead.py

1. A custom op's dispatch: torch.library.custom_op against Library.define + impl (runner/op_registry.py).
2. Triton's launch arithmetic (triton.cdiv / next_power_of_2, ConstexprFunctions in Triton 3.6) against
   plain Python (runner/device.py).
3. The Python of one attention call of an eager / piecewise step (TritonBackend.forward for a prefill
   chunk, a mixed batch and a decode batch, llama-3.2-1b shapes), with the Triton kernels replaced by
   no-ops: what graphbench's wrappers cost before any launch.
4. The launch key of the attention kernel: Triton's binder + cache key against runner/launch.py's.
Medians of many calls, microseconds. Figures are this machine's; the H200 host's differ.
"""

from __future__ import annotations

import statistics
import time

import torch  # at module scope: the ops' string annotations (future import) are resolved in it


def per_call_us(fn, number: int = 20000) -> float:
    for _ in range(number // 10):
        fn()
    samples = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(number // 7):
            fn()
        samples.append((time.perf_counter() - start) / (number // 7) * 1e6)
    return statistics.median(samples)


def custom_op_dispatch() -> dict[str, float]:
    from graphbench.runner.op_registry import register_op

    def body(x: torch.Tensor, out: torch.Tensor) -> None:
        return None

    shim = torch.library.custom_op("hostoverhead::via_custom_op", mutates_args=("out",))(body)
    shim.register_fake(lambda x, out: None)
    direct = register_op("hostoverhead::direct", body, lambda x, out: None, mutates_args=("out",))
    x, out = torch.randn(4), torch.empty(4)
    with torch.inference_mode():
        return {"custom_op": per_call_us(lambda: torch.ops.hostoverhead.via_custom_op.default(x, out)),
                "Library.define": per_call_us(lambda: direct(x, out))}


def launch_arithmetic() -> dict[str, float]:
    import triton

    from graphbench.runner.device import cdiv, next_power_of_2

    return {"triton.next_power_of_2": per_call_us(lambda: triton.next_power_of_2(1000)),
            "triton.cdiv": per_call_us(lambda: triton.cdiv(1000, 64)),
            "device.next_power_of_2": per_call_us(lambda: next_power_of_2(1000)),
            "device.cdiv": per_call_us(lambda: cdiv(1000, 64))}


def attention_wrappers() -> dict[str, float]:
    import graphbench.runner.attention.triton_cache_write as cache_write
    import graphbench.runner.attention.triton_decode as decode
    import graphbench.runner.attention.triton_kernels as kernels
    from graphbench.runner.attention.backend import AttentionMetadata
    from graphbench.runner.attention.triton_backend import TritonBackend

    class NoLaunch:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    from graphbench.runner import launch

    launch.DIRECT_LAUNCH = False  # the mocked kernels below stand behind the JIT path (no GPU to key on)
    for module, name in ((kernels, "_attention_launch"), (kernels, "_merge_splits_launch"),
                         (cache_write, "_write_kv_launch"), (decode, "_decode_launch")):
        getattr(module, name).kernel = NoLaunch()  # (runner/launch.py's launcher: its JIT path, mocked)
    kernels._num_sms = decode._num_sms = lambda index: 132  # an H200's SM count, without a GPU

    def one_call(num_tokens: int, num_reqs: int, uniform: bool) -> float:
        bf16 = torch.bfloat16
        q = torch.empty(num_tokens, 32, 64, dtype=bf16)  # llama-3.2-1b: 32 heads, 8 kv heads, head_dim 64
        k, v = torch.empty(num_tokens, 8, 64, dtype=bf16), torch.empty(num_tokens, 8, 64, dtype=bf16)
        k_cache, v_cache = torch.empty(64, 16, 8, 64, dtype=bf16), torch.empty(64, 16, 8, 64, dtype=bf16)
        meta = AttentionMetadata(slot_mapping=torch.zeros(num_tokens, dtype=torch.int64),
                                 query_start_loc=torch.zeros(257, dtype=torch.int32),
                                 seq_lens=torch.zeros(256, dtype=torch.int32),
                                 block_tables=torch.zeros(256, 64, dtype=torch.int32), num_reqs=num_reqs,
                                 num_tokens=num_tokens, query_start_loc_host=[], seq_lens_host=[])
        meta.uniform_decode = uniform
        backend, out = TritonBackend(), torch.empty_like(q)
        return per_call_us(lambda: backend.forward(q, k, v, k_cache, v_cache, meta, 0.125, out), 5000)

    return {"prefill chunk (2048 tokens, 16 requests)": one_call(2048, 16, False),
            "mixed batch (256 tokens, 40 requests)": one_call(256, 40, False),
            "decode batch (64 requests)": one_call(64, 64, True)}


def launch_keys() -> dict[str, float]:
    """What each launch of the attention kernel (24 positional arguments, 11 keywords) spends on
    telling which compiled kernel applies: Triton's binder and cache key (inside JITFunction.run),
    against runner/launch.py's generated key (its direct launches)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import compute_cache_key, create_function_from_signature

    from graphbench.runner import launch
    from graphbench.runner.attention.triton_kernels import _attention_kernel, _attention_launch

    launch._current_device = lambda: 0  # (no GPU here)
    tensors = [torch.empty(64) for _ in range(9)]
    args = (*tensors, 0.125, 2048, 64, 32, 2048, 64, 2048, 64, 512, 64, 8, 512, 64, 8, 64)
    meta = dict(GROUP=4, HEAD_DIM=64, BLOCK_D=64, BLOCK_SIZE=16, PRECISION="tf32", INTERPRET=False, TILE_N=64,
                BLOCK_M=64, NUM_SPLITS=1, BLOCK_Q=16, num_warps=4)
    binder = create_function_from_signature(_attention_kernel.signature, _attention_kernel.params,
                                            make_backend(GPUTarget("cuda", 90, 32)))
    options = dict(meta, debug=False, instrumentation_mode="")
    key_cache: dict = {}

    def triton_key():
        _bound, specialization, opts = binder(*args, **options)
        compute_cache_key(key_cache, specialization, opts)

    cached: dict = {}
    return {"Triton: binder + compute_cache_key": per_call_us(triton_key, 5000),
            "runner/launch.py: generated key + lookup": per_call_us(
                lambda: cached.get(_attention_launch._key((1,), args, meta)), 5000)}


def main() -> None:
    for title, measure in (("custom op dispatch", custom_op_dispatch), ("launch arithmetic", launch_arithmetic),
                           ("attention call, kernels not launched", attention_wrappers),
                           ("launch key of the attention kernel", launch_keys)):
        print(title)
        for name, us in measure().items():
            print(f"  {name:45s} {us:8.2f} us")


if __name__ == "__main__":
    main()
