"""Choosing the attention backend by name: 'auto' is triton on CUDA and reference on the CPU.

A backend registers itself (backend.register_backend) when its module is imported: the reference
backend's always is, the triton backend's only on CUDA (it imports Triton).
"""

from __future__ import annotations

from graphbench.errors import GraphbenchError
from graphbench.runner.attention import reference  # noqa: F401  (registers)
from graphbench.runner.attention.backend import AttentionBackend, registered_backends


def create_backend(name: str, device_type: str) -> AttentionBackend:
    """Instantiate a backend; 'auto' is triton on CUDA and reference on the CPU."""
    if name == "auto":
        name = "triton" if device_type == "cuda" else "reference"
    if name == "triton":
        if device_type != "cuda":
            raise GraphbenchError("the triton attention backend needs a CUDA device; use --attention-backend reference")
        from graphbench.runner.attention import triton_backend  # noqa: F401
    backends = registered_backends()
    if name not in backends:
        raise GraphbenchError(f"unknown attention backend {name!r}; choose from {', '.join(sorted(backends))}")
    return backends[name]()
