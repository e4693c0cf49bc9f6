"""Programmatic dependent launch (PDL, Hopper and later) for graphbench's own Triton kernels.

A kernel launched with PDL may start while the kernel before it in the stream is still finishing: its
programs get resident and wait (griddepcontrol.wait) until the previous kernel has completed and its
writes are visible, then let the next kernel launch early in turn (griddepcontrol.launch_dependents).
What it saves is the gap between dependent kernels, ~1 us each in a CUDA graph of ~200 small kernels
(a batch-1 decode step). Every PDL kernel waits before its first store, and before it loads anything
the kernel before it wrote, so the order of memory effects is the stream's: a chain A -> B -> C holds
because B waits for A before it lets C go. So what a kernel loads before its wait is what was written
before the graph started, weights, or what a kernel at least two back wrote: add-norm's residual, and the
step's inputs, which a FULL recording's first kernel unpacks (kernels/step_inputs.py; the kernel after it,
the embedding's, waits before it loads the token ids).

Only the engine's capture phase launches with it (`graph_launches`): the recordings, and the eager
warm-up just before them, which compiles and loads the PDL variants so that nothing loads inside a
capture. That is where the gaps are (a replayed graph has no host between its kernels) and where it
was measured (H200: -O2 batch 1 1.026 -> 0.931 ms, batch 64 1.319 -> 1.255 ms; benchmarks/RESULTS.md, 2026-11-30,
5f3d955). An eager
step's gaps are the host's launch time, which PDL does not shorten; the one eager measurement (-O0,
batch 64) was 2x slower with it, beside another job, unexplained. Eager steps launch as without PDL.
On by default; the debug hatch GRAPHBENCH_PDL=0 turns it off (graphbench.env).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Iterator

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from graphbench import env
from graphbench.runner.kernels.util import triton_interpreting


@functools.lru_cache(maxsize=None)
def _supports_pdl(device_index: int) -> bool:
    return torch.cuda.get_device_capability(device_index) >= (9, 0)


_graph_phase = False


@contextmanager
def graph_launches() -> Iterator[None]:
    """Kernels launched inside may use PDL (the engine's capture phase)."""
    global _graph_phase
    previous, _graph_phase = _graph_phase, True
    try:
        yield
    finally:
        _graph_phase = previous


def use_pdl(t: torch.Tensor) -> bool:
    """Launch with PDL: inside graph_launches, switched on, a CUDA tensor (not the interpreter), a
    Hopper or later GPU."""
    return (_graph_phase and t.is_cuda and env.hatch(env.PDL) and not triton_interpreting()
            and _supports_pdl(t.device.index or 0))


def pdl_launch_options(pdl: bool) -> dict:
    """The launch keyword for Triton (none at all without PDL: the interpreter takes no launch options)."""
    return {"launch_pdl": True} if pdl else {}


def pdl_arguments(t: torch.Tensor) -> dict:
    """A launch's PDL keywords for a kernel with a `PDL` constexpr: the constexpr and the launch option."""
    pdl = use_pdl(t)
    return {"PDL": pdl, **pdl_launch_options(pdl)}


@triton.jit
def pdl_enter(PDL: tl.constexpr):
    """First statement of a kernel that may be launched with PDL: wait for the previous kernel, then let
    the next one launch. Nothing without PDL."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
