"""A cached direct launcher for graphbench's own Triton kernels (the eager steps' host time, issue 5).

`kernel[grid](*args, **meta)` runs Triton's JITFunction.run on every call: device and stream lookups,
the binder that specialises every argument, the cache key, global-value checks, launch metadata,
then the compiled launcher. An eager prefill step launches ~80 of graphbench's kernels, and those
steps are host-bound (~7.5 ms of launches for ~6.9 ms of GPU work at -O2, 2048 tokens; benchmarks/RESULTS.md,
2026-11-29, 5293619), which is where the spread between repeats comes from.

`DirectLauncher(kernel)[grid](*args, **meta)` goes through JITFunction.run the first time it sees a
launch's specialisation key (which compiles or loads the kernel and launches it), keeps the compiled
kernel it returns, and afterwards calls its launcher directly. The key is what Triton specialises a
launch on, made at least as fine: the current device; each tensor's dtype and 16-byte alignment;
each int's == 1, divisibility by 16 and 32/64-bit range; floats and bools by type; None; constexpr
arguments and keyword arguments by type and value (Triton compiles PDL=1 and PDL=True apart);
Triton's debug switch. A finer key only costs another entry. The key is computed by a function
generated for the call site's argument kinds at its first launch (6.3 us for the attention kernel
against 13.1 us for Triton's binder and cache key on a 2-core CPU; benchmarks/RESULTS.md, 2026-11-30, db2012d).
These take the JIT path: a later launch passing other arguments (another count, other keywords,
another kind in a slot), a callable grid, a kernel without a readable parameter list, the
interpreter, a Triton whose launch returns no compiled kernel. Direct launches skip what
JITFunction.run adds around a launch: launch hooks (proton), pre-run hooks, the check that globals
used by the kernel have not changed, and instrumentation modes switched on after the first launch.
The debug hatch GRAPHBENCH_DIRECT_LAUNCH=0 (graphbench.env) profiles or debugs with those.

On by default since a measurement on an H200 (benchmarks/RESULTS.md, 2026-11-30, 180d046): the engine's wrapper of
add-norm took 11.4 us a launch against 16.3 through the JIT path, and an eager 2048-token -O2 step's host time
fell from 7.7-12.9 ms to 5.9-6.1 ms, under its 7.5 ms of GPU work.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from graphbench import env
from graphbench.runner.kernels.util import triton_interpreting


class _NoKey(Exception):
    """This launch cannot be keyed: take the JIT path."""


def _no_key() -> bool:
    raise _NoKey


def _slot_expression(value: Any, slot: str, constexpr: bool) -> str | None:
    """The key's expression for one argument slot, from the kind of value the first launch passed there
    (a later launch passing another kind either changes the key's type part or raises: JIT path)."""
    if constexpr:
        if isinstance(value, float):
            return f"{slot}.__class__, repr({slot})"  # 0.0 and -0.0 are different constexprs
        return f"{slot}.__class__, {slot}" if isinstance(value, (int, bool, str, type(None))) else None
    if isinstance(value, torch.Tensor):
        return f"{slot}.dtype, {slot}.data_ptr() & 15 == 0"
    if isinstance(value, bool):
        return f"{slot}.__class__"
    if isinstance(value, int):
        return (f"{slot}.__class__, {slot} == 1, {slot} & 15 == 0, -2147483648 <= {slot} <= 2147483647, "
                f"{slot} <= 9223372036854775807")
    if isinstance(value, float):
        return f"{slot}.__class__"
    if value is None:
        return f"({slot} is None or _no_key())"  # a None slot that later gets a tensor: keyless
    return None


def make_key_function(args: tuple, meta: dict, constexpr: list[bool]) -> Callable[[tuple, dict], tuple] | None:
    """A function (args, meta) -> the launch key, generated for this call site's argument kinds (a
    generated expression costs a fraction of a per-argument loop: the key is computed every launch).
    None when some argument is of a kind no key is made for."""
    # a launch with other positional or keyword arguments than the first has no key (JIT path)
    parts = [f"(len(a) == {len(args)} or _no_key())", f"(len(m) == {len(meta)} or _no_key())"]
    for i, value in enumerate(args):
        expression = _slot_expression(value, f"a[{i}]", constexpr[i])
        if expression is None:
            return None
        parts.append(expression)
    for name, value in meta.items():  # keyword arguments: constexprs and launch options, by type and value
        expression = _slot_expression(value, f"m[{name!r}]", constexpr=True)
        if expression is None:
            return None
        parts.append(expression)
    return eval(f"lambda a, m: ({', '.join(parts)},)", {"_no_key": _no_key, "repr": repr})  # noqa: S307


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
            return env.flag("TRITON_DEBUG")
    return bool(_knobs.runtime.debug)


_direct: bool | None = None  # the debug hatch GRAPHBENCH_DIRECT_LAUNCH, read at the first launch


def direct_launches() -> bool:
    """Whether launches may skip Triton's JIT path (read once, at the first launch; graphbench.env)."""
    global _direct
    if _direct is None:
        _direct = env.hatch(env.DIRECT_LAUNCH)
    return _direct


_compile_only = False


@contextmanager
def compile_only() -> Iterator[None]:
    """Launches inside compile their kernels (into Triton's caches) and launch nothing, so that start-up can
    compile the kernel candidates it times from several threads at once (runner/kernel_timing.py)."""
    global _compile_only
    previous, _compile_only = _compile_only, True
    try:
        yield
    finally:
        _compile_only = previous


class LaunchList(list):
    """The launches listed inside list_launches, one per (launcher, launch key) (a launch without a key kept
    as is): a listed launch holds its arguments, so a pass over every captured size that kept each launch
    held every size's activations at once (8 GiB of SmolLM2's at 51 sizes on an H100, beyond the memory the
    KV cache leaves: benchmarks/RESULTS.md, 2026-12-06)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: set[tuple] = set()

    def add(self, launcher: DirectLauncher, grid: Any, args: tuple, meta: dict) -> None:
        key = launcher._key(grid, args, meta) if launcher.keyable else None
        if key is not None:
            if (id(launcher), key) in self.keys:
                return
            self.keys.add((id(launcher), key))
        self.append((launcher, grid, args, meta))


_listed: LaunchList | None = None  # inside list_launches: the launches made there, none of them launched


@contextmanager
def list_launches() -> Iterator[LaunchList]:
    """Launches inside are listed as (launcher, grid, args, meta), one per launch key, and not made (their
    outputs keep whatever they held): what a pass over a phase would launch, for compiling it ahead from
    several threads (runner/kernel_bench.precompile)."""
    global _listed
    previous, _listed = _listed, LaunchList()
    try:
        yield _listed
    finally:
        _listed = previous


class DirectLauncher:
    """kernel[grid](...) with the compiled kernel cached per launch key (see the module's docstring)."""

    MAX_ENTRIES = 64  # per kernel: a call site that keeps making new keys stops being cached

    def __init__(self, kernel: Any):
        self.kernel = kernel
        params = list(inspect.signature(kernel.fn).parameters.values())
        self.names = [p.name for p in params]
        self.defaults = [p.default for p in params]
        kernel_params = getattr(kernel, "params", None)
        # which parameters are constexpr (keyed by value); unknown: no direct launches at all
        self.constexpr = ([bool(getattr(kp, "is_constexpr", False)) for kp in kernel_params]
                          if kernel_params is not None and len(kernel_params) == len(params) else None)
        self.key_function: Callable[[tuple, dict], tuple] | None = None
        self.keyable = self.constexpr is not None
        self.compiled: dict[tuple, tuple | None] = {}
        self.num_direct = 0  # launches that skipped the JIT path (tests and probes read it)

    def __getitem__(self, grid: tuple) -> Callable[..., None]:
        return lambda *args, **meta: self.launch(grid, args, meta)

    def launch(self, grid: tuple, args: tuple, meta: dict) -> None:
        if _listed is not None:
            _listed.add(self, grid, args, meta)
            return
        if _compile_only:
            self.kernel.warmup(*args, grid=grid, **meta)
            return
        if not (_direct if _direct is not None else direct_launches()) or not self.keyable or triton_interpreting():
            self.kernel[grid](*args, **meta)
            return
        key = self._key(grid, args, meta)
        entry = self.compiled.get(key) if key is not None else None
        if entry is None:
            compiled = self.kernel[grid](*args, **meta)
            if key is not None and key not in self.compiled and len(self.compiled) < self.MAX_ENTRIES:
                self.compiled[key] = self._entry(compiled, args, meta)
            return
        compiled, tail = entry
        g1 = grid[1] if len(grid) > 1 else 1
        g2 = grid[2] if len(grid) > 2 else 1
        compiled.run(grid[0], g1, g2, _current_stream(key[1]), compiled.function, compiled.packed_metadata,
                     None, None, None, *args, *tail)
        self.num_direct += 1

    def _key(self, grid: Any, args: tuple, meta: dict) -> tuple | None:
        if callable(grid) or len(args) > len(self.names):
            return None
        if self.key_function is None:
            self.key_function = make_key_function(args, meta, self.constexpr)
            if self.key_function is None:
                self.keyable = False
                return None
        try:
            signature = self.key_function(args, meta)
        except (_NoKey, AttributeError, IndexError, KeyError, TypeError):
            return None  # another kind of argument than this call site's first launch passed
        return signature, _current_device(), _triton_debug()

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
