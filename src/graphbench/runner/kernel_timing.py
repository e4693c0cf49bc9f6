"""Kernel choices by measurement: at a cold start, each projection shape of the model and each row class the
engine meets is timed on this GPU over its candidate kernels and cuBLAS, the fastest is installed
(runner/kernel_choice.py) and written into the compile-cache entry; a warm start loads it.

A candidate is timed as the engine runs it: many launches recorded in one CUDA graph with PDL, replayed,
each launch on its own copy of the weight so that the weights stream from memory as in a step (together
past the L2), not from what the launch before left in L2. A candidate that does not compile (shared
memory) is skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernel_choice import KernelChoice

log = logging.getLogger("graphbench.engine")

CHOICES_FILE = "kernel_choices.json"
# the sources whose change can change which candidate is fastest: a stored choice made by others is redone
_SOURCES = ("kernel_choice.py", "kernel_timing.py", "kernels/gemv.py", "kernels/skinny_gemm.py")
_PAST_L2_BYTES = 160 * 2**20  # weight copies a graph streams in turn (an H200's L2 is 60 MiB)
_MAX_COPIES = 128


def graph_time_us(call: Callable[[int], object], num_calls: int, replays: int = 20, repeats: int = 7) -> float:
    """Median time per call of a CUDA graph holding num_calls calls (call(i) issues call i: rotate inputs
    with i so that each call streams its own memory, not what the call before left in L2)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(num_calls):  # warm-up: Triton JIT, cuBLAS handles, Inductor autotuning
            call(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(num_calls):
            call(i)
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / (replays * num_calls))
    return statistics.median(samples)


def sources_hash() -> str:
    here = Path(__file__).resolve().parent
    return hashlib.sha256(b"".join((here / rel).read_bytes() for rel in _SOURCES)).hexdigest()[:12]


def model_projections(model) -> list[tuple[str, torch.Tensor, torch.Tensor | None]]:
    """(op, weight, bias) of each distinct projection shape the model runs (every layer has layer 0's)."""
    layer = model.layers[0]
    found = [("linear", layer.self_attn.qkv_proj), ("linear", layer.self_attn.o_proj),
             ("gate_up", layer.mlp.gate_up_proj), ("linear", layer.mlp.down_proj), ("linear", model.lm_head)]
    seen, out = set(), []
    for op, proj in found:
        key = (op, tuple(proj.weight.shape), proj.bias is not None)
        if key not in seen:
            seen.add(key)
            out.append((op, proj.weight, proj.bias))
    return out


def load_or_measure(model, directory: Path, device_name: str, max_rows: int) -> dict:
    """The kernel choices for this model: loaded from the cache entry when it holds them for this GPU and
    these kernels, else measured and written there; installed either way. -> the start-up report's record."""
    path = directory / CHOICES_FILE
    started = time.perf_counter()
    stored = _read(path, device_name)
    if stored is not None:
        kc.install(stored)
        return {"source": "loaded", "seconds": time.perf_counter() - started, "choices": [c.to_dict() for c in stored]}
    choices = measure(model, max_rows)
    seconds = time.perf_counter() - started
    kc.install(choices)
    from graphbench.files import write_atomic

    write_atomic(path, json.dumps({"device": device_name, "sources": sources_hash(), "seconds": round(seconds, 3),
                                   "choices": [c.to_dict() for c in choices]}, indent=1))
    log.info("kernel choices: %d measured in %.1f s", len(choices), seconds)
    return {"source": "measured", "seconds": seconds, "choices": [c.to_dict() for c in choices]}


def without_entry(model) -> dict:
    """The start-up record of an engine that timed nothing (no compile-cache entry: -O0): the choices an
    earlier engine of this process installed for these shapes, which its projections then run, else the rules."""
    shapes = {(op, *weight.shape) for op, weight, _ in model_projections(model)}
    found = [c.to_dict() for c in kc.installed() if (c.op, c.n, c.k) in shapes]
    return {"source": "earlier in this process" if found else "rules", "seconds": 0.0, "choices": found}


def _read(path: Path, device_name: str) -> list[KernelChoice] | None:
    """The stored choices, or None: missing, written for another GPU or other kernels, or unreadable."""
    try:
        data = json.loads(path.read_text())
        if data["device"] != device_name or data["sources"] != sources_hash():
            return None
        return [KernelChoice.from_dict(c) for c in data["choices"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, ArithmeticError) as exc:
        log.warning("kernel choices in %s unreadable (%s); measuring again", path, exc)
        return None


def measure(model, max_rows: int) -> list[KernelChoice]:
    """Time every projection shape at every row class up to max_rows (the most rows one step's projection
    sees: max_num_batched_tokens) and choose the fastest of each."""
    from graphbench.runner.kernels import skinny_gemm
    from graphbench.runner.kernels.paged_attention import sm_count
    from graphbench.runner.kernels.pdl import graph_launches

    num_sms = sm_count(torch.cuda.current_device())
    classes = [c for c in kc.ROW_CLASSES if c == 1 or c // 2 < max_rows]
    workspaces_before = skinny_gemm.workspace_keys()  # another engine's recordings may hold these
    choices = []
    with graph_launches(), torch.no_grad():
        for op, weight, bias in model_projections(model):
            timer = _Timer(weight, bias)
            _compile_coarse(op, timer, classes, num_sms)
            for rows in classes:
                choices.append(_choose(op, timer, rows, num_sms))
            del timer
    skinny_gemm.release_workspaces(keep=workspaces_before)  # the candidates' (the chosen ones come back on use)
    torch.cuda.empty_cache()
    return choices


class _Timer:
    """Times one projection's kernels on copies of its weight (together past the L2)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        self.n, self.k = weight.shape
        self.bias = bias
        num = min(_MAX_COPIES, -(-_PAST_L2_BYTES // (weight.numel() * weight.element_size())))
        self.copies = [weight] + [weight.clone() for _ in range(num - 1)]
        self.calls = max(8, len(self.copies))
        self.dtype = weight.dtype

    def prepare(self, op: str, kernel: str, candidates: list[tuple], rows: int) -> None:
        """Compile these candidates' kernels ahead of their timing, in parallel."""
        x = torch.empty(rows, self.k, dtype=self.dtype, device=self.copies[0].device)
        _compile_all([lambda b=b: _launcher(op, kernel, b, x, self.bias)(self.copies[0]) for b in candidates])

    def time(self, op: str, kernel: str, blocks: tuple, rows: int) -> float | None:
        """Microseconds a launch (with the silu-mul after it where a gate_up kernel leaves it), or None
        where the candidate does not run."""
        x = torch.randn(rows, self.k, dtype=self.dtype, device=self.copies[0].device)
        run = _launcher(op, kernel, blocks, x, self.bias)
        try:
            return graph_time_us(lambda i: run(self.copies[i % len(self.copies)]), self.calls, replays=5, repeats=3)
        except Exception as exc:  # a Triton compile out of resources, a launch the GPU refuses
            log.debug("kernel candidate %s %s for %dx%d at %d rows skipped: %s", kernel, blocks, self.n, self.k,
                      rows, exc)
            return None


def _launcher(op: str, kernel: str, blocks: tuple, x: torch.Tensor, bias: torch.Tensor | None):
    """weight -> the projection as the engine launches it with this choice."""
    from graphbench.runner.kernels import gemv as gemv_kernels
    from graphbench.runner.kernels import skinny_gemm

    def then_silu(gate_up: torch.Tensor) -> torch.Tensor:
        hidden = gate_up.new_empty((gate_up.shape[0], gate_up.shape[1] // 2))
        gemv_kernels.launch_silu_mul(gate_up, hidden)
        return hidden

    post = then_silu if op == "gate_up" else (lambda y: y)

    def gemv(w):
        out = x.new_empty((1, w.shape[0]))
        gemv_kernels.launch_gemv(x, w, bias, out, *blocks)
        return out

    def gated_gemv(w):
        out = x.new_empty((1, w.shape[0] // 2))
        gemv_kernels.launch_gated_gemv(x, w, out, *blocks)
        return out

    return {"torch": lambda w: post(F.linear(x, w, bias)),
            "gemv": gemv,
            "gated_gemv": gated_gemv,
            "skinny": lambda w: post(skinny_gemm.skinny_gemm(x, w, bias, config=blocks)),
            "gated_skinny": lambda w: skinny_gemm.skinny_gate_up(x, w, config=blocks)}[kernel]


def _search(time_one: Callable[[tuple], float | None], coarse: list[tuple],
            neighbours: Callable[[tuple], list[tuple]],
            prepare: Callable[[list[tuple]], None] = lambda blocks: None) -> tuple[tuple, float, int] | None:
    """(blocks, us, candidates timed) of the fastest: the coarse grid, then the best one's neighbours
    (twice: the neighbours of a neighbour that won). prepare(blocks) compiles a round's candidates first."""
    prepare(coarse)
    timed: dict[tuple, float | None] = {b: time_one(b) for b in coarse}
    for _ in range(2):
        ok = {b: t for b, t in timed.items() if t is not None}
        if not ok:
            return None
        new = [b for b in neighbours(min(ok, key=ok.get)) if b not in timed]
        prepare(new)
        timed.update((b, time_one(b)) for b in new)
    ok = {b: t for b, t in timed.items() if t is not None}
    best = min(ok, key=ok.get)
    return best, ok[best], len(timed)


def _compile_all(calls: list[Callable[[], object]]) -> None:
    """Compile the candidates these launches need, from several threads (Triton compiles mostly outside the
    GIL: LLVM and ptxas), launching nothing; one that does not compile is left to its timing to skip."""
    if len(calls) < 2:
        return
    from concurrent.futures import ThreadPoolExecutor

    from graphbench.runner.kernels.launch import compile_only

    with compile_only(), ThreadPoolExecutor(max_workers=min(len(calls), os.cpu_count() or 1, 16)) as pool:
        for future in [pool.submit(call) for call in calls]:
            try:
                future.result()
            except Exception as exc:  # out of resources: its timing says so again and skips it
                log.debug("kernel candidate not compiled ahead: %s", exc)


def _searches(op: str, n: int, k: int, rows: int, dtype: torch.dtype, num_sms: int) -> dict[str, tuple[list, Callable]]:
    """kernel -> (its coarse candidates, their neighbours) for op at this row class."""
    if rows == 1:
        if op == "linear":
            return {"gemv": (kc.gemv_candidates(n, k), kc.gemv_neighbours)}
        return {"gated_gemv": (kc.gated_gemv_candidates(n, k), kc.gemv_neighbours)}
    if dtype not in (torch.bfloat16, torch.float16):  # the skinny GEMM's dtypes
        return {}
    out = {"skinny": (kc.skinny_candidates(n, k, num_sms), lambda b: kc.skinny_neighbours(b, k))}
    if op == "gate_up":
        out["gated_skinny"] = (kc.gated_skinny_candidates(k), kc.gated_skinny_neighbours)
    return out


def _compile_coarse(op: str, timer: _Timer, classes: list[int], num_sms: int) -> None:
    """Compile every row class's coarse candidates for one projection at once (the most threads busy)."""
    calls = []
    for rows in classes:
        x = torch.empty(rows, timer.k, dtype=timer.dtype, device=timer.copies[0].device)
        for kernel, (coarse, _) in _searches(op, timer.n, timer.k, rows, timer.dtype, num_sms).items():
            calls += [lambda b=b, x=x, kernel=kernel: _launcher(op, kernel, b, x, timer.bias)(timer.copies[0])
                      for b in coarse]
    _compile_all(calls)


def _choose(op: str, timer: _Timer, rows: int, num_sms: int) -> KernelChoice:
    """The fastest kernel for op at this row class: graphbench's candidates against cuBLAS."""
    n, k = timer.n, timer.k
    torch_us = timer.time(op, "torch", (), rows)
    best = KernelChoice(op, n, k, rows, "torch", (), torch_us, torch_us, 1)
    timed = 1
    for kernel, (coarse, neighbours) in _searches(op, n, k, rows, timer.dtype, num_sms).items():
        found = _search(lambda b, kernel=kernel: timer.time(op, kernel, b, rows), coarse, neighbours,
                        lambda blocks, kernel=kernel: timer.prepare(op, kernel, blocks, rows))
        if found is None:
            continue
        blocks, us, count = found
        timed += count
        if best.us is None or us < best.us:
            best = KernelChoice(op, n, k, rows, kernel, blocks, us, torch_us)
    return KernelChoice(best.op, n, k, rows, best.kernel, best.blocks, best.us, torch_us, timed)
