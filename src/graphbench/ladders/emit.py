"""A capture ladder as the configuration a real server takes (pure Python, no torch).

- vLLM: `--compilation-config '{"cudagraph_capture_sizes": [...], "max_cudagraph_capture_size": N}'`
  (CompilationConfig's fields; the sizes are tokens a step, which for decode without speculative
  tokens is the number of requests; docs.vllm.ai, API reference vllm.config.compilation).
- SGLang: `--cuda-graph-bs 1 2 4 ... --cuda-graph-max-bs N` (ServerArgs cuda_graph_bs and
  cuda_graph_max_bs: decode batch sizes in requests).
- TensorRT-LLM: `cuda_graph_config` with `batch_sizes` and `enable_padding: true` (the LLM API's
  CudaGraphConfig; in the YAML given to `trtllm-serve --extra_llm_api_options`), batch sizes in
  requests; padding on, so a batch runs the next larger graph as graphbench's ladders assume.

docs/SERVERS.md cites where each spelling was checked. With speculative tokens the ladder is in
tokens (multiples of 1 + k); SGLang and TensorRT-LLM take requests, so their sizes are the rungs
divided by 1 + k.
"""

from __future__ import annotations

import json

from graphbench.errors import GraphbenchError

SERVERS = ("vllm", "sglang", "trtllm")


def server_config(sizes: list[int] | tuple[int, ...], server: str, decode_query_len: int = 1,
                  max_requests: int | None = None) -> str:
    """The text to paste: command-line flags (vLLM, SGLang) or a YAML block (TensorRT-LLM). SGLang's
    and TensorRT-LLM's graphs are decode batches of requests: sizes above max_requests are dropped
    (vLLM's larger rungs serve mixed batches of tokens)."""
    if server not in SERVERS:
        raise GraphbenchError(f"unknown server {server!r} for --emit; choose from {', '.join(SERVERS)}")
    sizes = sorted(set(sizes))
    if not sizes:
        raise GraphbenchError("the ladder is empty: nothing to emit (every batch would run eager)")
    if server == "vllm":
        config = {"cudagraph_capture_sizes": sizes, "max_cudagraph_capture_size": sizes[-1]}
        return f"--compilation-config '{json.dumps(config, separators=(', ', ': '))}'"
    requests = sorted({s // decode_query_len for s in sizes if s % decode_query_len == 0 and s >= decode_query_len
                       and (max_requests is None or s // decode_query_len <= max_requests)})
    if not requests:
        raise GraphbenchError(f"no rung of the ladder is a multiple of {decode_query_len} (1 + speculative tokens)")
    if server == "sglang":
        return f"--cuda-graph-bs {' '.join(map(str, requests))} --cuda-graph-max-bs {requests[-1]}"
    return ("cuda_graph_config:\n"
            "  enable_padding: true\n"
            f"  batch_sizes: [{', '.join(map(str, requests))}]")
