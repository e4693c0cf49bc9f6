"""A cached direct launcher for graphbench's own Triton kernels (the eager steps' host time, issue 5).

`kernel[grid](*args, **meta)` runs Triton's JITFunction.run on every call: device and stream lookups,
the binder that specialises every argument, the cache key, global-value checks, launch metadata,
then the compiled launcher. An eager prefill step launches ~80 of graphbench's kernels, and those
steps are host-bound (~7.5 ms of launches for ~6.9 ms of GPU work at -O2, 2048 tokens, session 6),
which is where the spread between repeats comes from.

`DirectLauncher(kernel)[grid](*args, **meta)` goes through JITFunction.run the first time it sees a
launch's specialisation key (which compiles or loads the kernel and launches it), keeps the compiled
kernel it returns, and afterwards calls its launcher directly. The key is what Triton specialises a
launch on, made at least as fine: the current device; each tensor's dtype, device and 16-byte
alignment; each int's == 1, divisibility by 16 and 32/64-bit range; floats and bools by type; None;
constexpr arguments and keyword arguments by type and value (Triton compiles PDL=1 and PDL=True
apart); Triton's debug switch. A finer key only costs another entry. An argument of any other kind,
a callable grid, a kernel without a readable parameter list, the interpreter, or a Triton whose launch
returns no compiled kernel takes the JIT path every time. Direct launches skip what JITFunction.run
adds around a launch: launch hooks (proton), pre-run hooks, the check that globals used by the kernel
have not changed, and instrumentation modes switched on after the first launch. Set
GRAPHBENCH_DIRECT_LAUNCH=0 to profile or debug with those.

Off until measured on the GPU (GRAPHBENCH_DIRECT_LAUNCH=1 turns it on; bench/debug/launch_overhead.py).
"""

from __future__ import annotations

import inspect
import os
from typing import Any, Callable

import torch

from graphbench.runner.device import triton_interpreting

DIRECT_LAUNCH = os.environ.get("GRAPHBENCH_DIRECT_LAUNCH", "0") == "1"

_INT32_MIN, _INT32_MAX, _INT64_MAX = -(2**31), 2**31 - 1, 2**63 - 1


def value_key(value: Any) -> Any:
    """A constexpr or keyword value by type and value (a float by its repr: 0.0 and -0.0 differ)."""
    if isinstance(value, float):
        return (float, repr(value))
    if isinstance(value, (int, bool, str, type(None))):
        return (type(value), value)
    return None


def arg_key(arg: Any, constexpr: bool) -> Any:
    """One argument's part of the launch key; None for a kind this launcher does not handle."""
    if constexpr:
        value = value_key(arg)
        return None if value is None else ("c", value)
    if isinstance(arg, torch.Tensor):
        return ("t", arg.dtype, arg.get_device(), arg.data_ptr() % 16 == 0)
    if isinstance(arg, bool):  # (before int: a bool is an int)
        return ("b",)
    if isinstance(arg, int):
        width = 0 if _INT32_MIN <= arg <= _INT32_MAX else 1 if arg <= _INT64_MAX else 2
        return ("i", arg == 1, arg % 16 == 0, width)
    if isinstance(arg, float):
        return ("f",)
    if arg is None:
        return ("n",)
    return None


def _current_device() -> int:
    return torch._C._cuda_getDevice()


def _current_stream(device_index: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device_index)


_knobs: Any = None


def _triton_debug() -> bool:
    """Triton's debug switch (JITFunction.run adds it to every launch's options)."""
    global _knobs
    if _knobs is None:
        try:
            from triton import knobs as _knobs
        except ImportError:  # an older Triton: no knobs module, the switch is an environment variable
            return os.environ.get("TRITON_DEBUG", "0") not in ("", "0")
    return bool(_knobs.runtime.debug)


class DirectLauncher:
    """kernel[grid](...) with the compiled kernel cached per launch key (see the module's docstring)."""

    def __init__(self, kernel: Any):
        self.kernel = kernel
        params = list(inspect.signature(kernel.fn).parameters.values())
        self.names = [p.name for p in params]
        self.defaults = [p.default for p in params]
        kernel_params = getattr(kernel, "params", None)
        # which parameters are constexpr (keyed by value); unknown: no direct launches at all
        self.constexpr = ([bool(getattr(kp, "is_constexpr", False)) for kp in kernel_params]
                          if kernel_params is not None and len(kernel_params) == len(params) else None)
        self.compiled: dict[tuple, tuple | None] = {}
        self.num_direct = 0  # launches that skipped the JIT path (tests and probes read it)

    def __getitem__(self, grid: tuple) -> Callable[..., None]:
        return lambda *args, **meta: self.launch(grid, args, meta)

    def launch(self, grid: tuple, args: tuple, meta: dict) -> None:
        if not DIRECT_LAUNCH or triton_interpreting():
            self.kernel[grid](*args, **meta)
            return
        key = self._key(grid, args, meta)
        entry = self.compiled.get(key) if key is not None else None
        if entry is None:
            compiled = self.kernel[grid](*args, **meta)
            if key is not None and key not in self.compiled:
                self.compiled[key] = self._entry(compiled, args, meta)
            return
        compiled, tail = entry
        device_index = key[2]
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        compiled.run(grid[0], g1, g2, _current_stream(device_index), compiled.function, compiled.packed_metadata,
                     None, None, None, *args, *tail)
        self.num_direct += 1

    def _key(self, grid: Any, args: tuple, meta: dict) -> tuple | None:
        if self.constexpr is None or callable(grid) or len(args) > len(self.names):
            return None
        parts = []
        for i, arg in enumerate(args):
            part = arg_key(arg, self.constexpr[i])
            if part is None:
                return None
            parts.append(part)
        meta_parts = []
        for name in sorted(meta):
            value = value_key(meta[name])  # (a tensor by keyword: None, so never keyed by identity)
            if value is None:
                return None
            meta_parts.append((name, value))
        return tuple(parts), tuple(meta_parts), _current_device(), _triton_debug()

    def _entry(self, compiled: Any, args: tuple, meta: dict) -> tuple | None:
        """(compiled kernel, the parameters after the positional ones in signature order), or None when
        this Triton's launch gave nothing to launch directly. (The tail holds keyword values, which
        are part of the key: the same key, the same tail.)"""
        if not all(hasattr(compiled, name) for name in ("run", "function", "packed_metadata")):
            return None
        tail = []
        for name, default in zip(self.names[len(args):], self.defaults[len(args):]):
            if name in meta:
                tail.append(meta[name])
            elif default is not inspect.Parameter.empty:
                tail.append(default)
            else:
                return None
        if not any(isinstance(a, torch.Tensor) and a.get_device() >= 0 for a in args):
            return None  # no CUDA tensor: nothing a direct launch should run on
        return compiled, tuple(tail)
