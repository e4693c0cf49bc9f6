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


def phase_server_config(decode_sizes: list[int] | tuple[int, ...], mixed_sizes: list[int] | tuple[int, ...], server: str,
                        decode_query_len: int = 1, max_requests: int | None = None) -> tuple[str, str | None]:
    """Two ladders (ladders/phases.py) as a server takes them: (the text to paste, a note where the server
    has no such option, else None). SGLang: `--cuda-graph-bs-decode` in requests and
    `--cuda-graph-bs-prefill` / `--cuda-graph-max-bs-prefill` in tokens (`--disable-piecewise-cuda-graph`
    for an empty mixed ladder); TensorRT-LLM: `cuda_graph_config.batch_sizes` in requests and
    `prefill_cuda_graph_backend: piecewise` with `prefill_capture_num_tokens`; vLLM has one ladder for both
    phases: their union, with a note."""
    if server not in SERVERS:
        raise GraphbenchError(f"unknown server {server!r} for --emit; choose from {', '.join(SERVERS)}")
    mixed = sorted(set(mixed_sizes))
    if server == "vllm":
        note = ("vLLM takes one capture ladder for decode and mixed steps (vllm-project/vllm#32946 prepares "
                "separate sizes): the union of both ladders is emitted, and decode steps pad to it")
        return server_config(sorted(set(decode_sizes) | set(mixed)), "vllm"), note
    decode = one_phase_config(decode_sizes, "decode", server, decode_query_len, max_requests)
    if not mixed:  # mixed steps eager: SGLang's prefill graphs off, TensorRT-LLM's left out
        return (f"{decode} --disable-piecewise-cuda-graph" if server == "sglang" else decode), None
    joint = " " if server == "sglang" else "\n"
    return decode + joint + one_phase_config(mixed, "mixed", server), None


def one_phase_config(sizes: list[int] | tuple[int, ...], phase: str, server: str, decode_query_len: int = 1,
                     max_requests: int | None = None) -> str:
    """One phase's ladder (tune --phase) as a server's option: the decode ladder as --cuda-graph-bs-decode
    (SGLang) or batch_sizes (TensorRT-LLM); the mixed ladder as --cuda-graph-bs-prefill (SGLang) or
    prefill_capture_num_tokens (TensorRT-LLM). vLLM has no ladder of either phase alone: its one ladder."""
    if phase not in ("decode", "mixed"):
        return server_config(sizes, server, decode_query_len, max_requests)
    if server == "vllm":
        raise GraphbenchError("vLLM takes one capture ladder for both phases (vllm-project/vllm#32946 prepares "
                              "separate sizes): tune --phase all for it")
    if phase == "decode":
        text = server_config(sizes, server, decode_query_len, max_requests)
        return text.replace("--cuda-graph-bs ", "--cuda-graph-bs-decode ") if server == "sglang" else text
    tokens = sorted(set(sizes))
    if not tokens:
        raise GraphbenchError("the ladder is empty: nothing to emit (every mixed step would run eager)")
    if server == "sglang":
        return f"--cuda-graph-bs-prefill {' '.join(map(str, tokens))} --cuda-graph-max-bs-prefill {tokens[-1]}"
    if server not in SERVERS:
        raise GraphbenchError(f"unknown server {server!r} for --emit; choose from {', '.join(SERVERS)}")
    return f"prefill_cuda_graph_backend: piecewise\nprefill_capture_num_tokens: [{', '.join(map(str, tokens))}]"


def check_emit_alone(emit: str | None, output_format: str, plot) -> None:
    """--emit prints only the server's configuration: a --format or --plot beside it would be dropped silently."""
    if emit is not None and (output_format != "table" or plot is not None):
        other = f"--format {output_format}" if output_format != "table" else f"--plot {plot}"
        raise GraphbenchError(f"--emit {emit} prints only the ladder as {emit}'s configuration, so {other} would not "
                              "be used: give one of them")
