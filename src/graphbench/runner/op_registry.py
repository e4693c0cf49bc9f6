"""Custom ops registered straight with the dispatcher (Library.define + impl).

`torch.library.custom_op` wraps every call in Python layers (a Dynamo-disabled wrapper, a per-device
backend shim, an output-aliasing check). A host profile of -O2's eager steps on the H200 (cProfile;
benchmarks/RESULTS.md, 2026-11-29, bdf620b) had that shim as the largest own-time entry of a launch:
every eager or piecewise step calls attention once a layer, and an eager step four more ops a layer,
so those steps were host-bound (a 2048-token prefill chunk: ~8 ms of launch for ~8 ms on the GPU).
Here the dispatcher calls the function itself; tracing sees the same OpOverload as before.
"""

from __future__ import annotations

from typing import Callable

import torch

# namespace -> its Library: a registration lives as long as its Library object
_libraries: dict[str, torch.library.Library] = {}


def register_op(qualname: str, fn: Callable, fake: Callable, mutates_args: tuple[str, ...] = ()):
    """Define `namespace::name` with fn's schema (from its annotations), fn as its kernel for every
    backend, fake as its meta kernel for tracing; returns the OpOverload (callable like fn)."""
    namespace, name = qualname.split("::")
    lib = _libraries.get(namespace)
    if lib is None:
        lib = _libraries[namespace] = torch.library.Library(namespace, "FRAGMENT")
    lib.define(name + torch.library.infer_schema(fn, mutates_args=mutates_args))
    lib.impl(name, fn, "CompositeExplicitAutograd")
    torch.library.register_fake(qualname, fake, lib=lib)
    return getattr(getattr(torch.ops, namespace), name).default
