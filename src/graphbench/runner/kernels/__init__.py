"""graphbench's own Triton kernels and how they are launched (runner/kernels/).

This room imports nothing of the engine: torch, Triton, the standard library and graphbench.env (its
debug hatches) only (tests/test_import_graph.py checks it). The engine calls in: runner/linear.py
(gemv, add_rmsnorm, skinny_gemm), runner/sampler.py (argmax), runner/attention/triton_backend.py
(paged_attention, paged_decode, kv_cache_write), runner/rope.py (rotary), runner/lora/weights.py
(lora_bgmv, lora_shrink), the capture phase (pdl.graph_launches).
"""
