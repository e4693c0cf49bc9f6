"""Kernel choices by measurement: at a cold start, each projection shape of the model and each row class the
engine meets is timed on this GPU over its candidate kernels and cuBLAS, the fastest is installed
(runner/kernel_choice.py) and written into the compile-cache entry, which a warm start loads, and into the
GPU's shared store (runner/kernel_choice_store.py), which another config's cold start with the same
projection shapes loads.

A candidate is timed as the engine runs it (runner/kernel_bench.py); at one row the residual add + RMSNorm in
front of qkv and gate/up is timed folded into the GEMV and apart (runner/norm_fold_timing.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Callable

import torch

from graphbench.runner import kernel_choice as kc
from graphbench.runner import kernel_choice_store as store
from graphbench.runner.kernel_bench import ProjectionTimer, compile_all, launcher, search
from graphbench.runner.kernel_choice import KernelChoice
from graphbench.runner.norm_fold_timing import choose_fold, norm_projections

log = logging.getLogger("graphbench.engine")

CHOICES_FILE = "kernel_choices.json"  # timed with PDL launches, as the engine runs them
NO_PDL_CHOICES_FILE = "kernel_choices-no-pdl.json"  # timed under the debug hatch GRAPHBENCH_PDL=0
# the sources whose change can change which candidate is fastest: a stored choice made by others is redone
_SOURCES = ("kernel_choice.py", "kernel_timing.py", "kernel_bench.py", "norm_fold_timing.py", "kernels/gemv.py",
            "kernels/row_pieces.py", "kernels/skinny_gemm.py", "kernels/norm_gemv.py", "kernels/add_rmsnorm.py",
            "kernels/util.py")


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


def timing_conditions(device_name: str, search: str = "") -> dict:
    """What a stored choice was timed under and must match to be loaded: the GPU, the kernels' sources,
    torch (its cuBLAS) and Triton, and whether the launches used PDL (GRAPHBENCH_PDL=0 times them without,
    and chooses differently: cuBLAS at 32 and 64 rows of SmolLM2's projections where the engine's PDL
    launches favour the skinny GEMM); and the named search apart they came from (config.model.kernel_search),
    where there is one."""
    import triton

    from graphbench import env

    conditions = {"device": device_name, "sources": sources_hash(), "torch": torch.__version__,
                  "triton": triton.__version__, "pdl": env.hatch(env.PDL)}
    return {**conditions, "search": search} if search else conditions


def load_or_measure(model, directory: Path, device_name: str, max_rows: int, shared: bool = True,
                    search: str = "") -> dict:
    """The kernel choices for this model: loaded from the cache entry when it holds them timed under these
    conditions, else from the GPU's shared store (another config's cold start timed the same shapes:
    runner/kernel_choice_store.py; not where shared is False: a cold start that cleared its entry to be
    measured as a first start), else measured and written to both; installed either way. search: the
    choices a search apart stored under this name (config.model.kernel_search): from the store only, the
    entry's own left as they are (measured and stored under the name where that search is missing). -> the
    start-up report's record."""
    if search:
        return _load_or_measure_searched(model, device_name, max_rows, search)
    started = time.perf_counter()
    conditions = timing_conditions(device_name)
    # a file per PDL setting: a run with the hatch and the next without do not re-time each other's choices
    path = directory / (CHOICES_FILE if conditions["pdl"] else NO_PDL_CHOICES_FILE)
    expected = expected_keys(model, max_rows)
    stored = _read(path, conditions, expected)
    if stored is not None:
        kc.install(stored)
        return {"source": "loaded", "seconds": time.perf_counter() - started, "choices": [c.to_dict() for c in stored]}
    key = store_key(model, max_rows)
    choices, source = (store.lookup(conditions, key, expected) if shared else None), "shared"
    if choices is None:
        choices, source = measure(model, max_rows), "measured"
        store.remember(conditions, key, choices, time.perf_counter() - started)
        log.info("kernel choices: %d measured in %.1f s", len(choices), time.perf_counter() - started)
    seconds = time.perf_counter() - started
    kc.install(choices)
    from graphbench.files import write_atomic

    write_atomic(path, json.dumps({**conditions, "seconds": round(seconds, 3), "choices": [c.to_dict() for c in choices]}, indent=1))
    return {"source": source, "seconds": seconds, "choices": [c.to_dict() for c in choices]}


def _load_or_measure_searched(model, device_name: str, max_rows: int, search: str) -> dict:
    started = time.perf_counter()
    conditions = timing_conditions(device_name, search)
    key = store_key(model, max_rows)
    choices, source = store.lookup(conditions, key, expected_keys(model, max_rows)), "shared"
    if choices is None:  # (a search apart that failed or was not run: this start pays it, and says so)
        log.warning("no kernel choices stored under the search %r for this model on this GPU: timing them now", search)
        choices, source = measure(model, max_rows), "measured"
        store.remember(conditions, key, choices, time.perf_counter() - started)
    kc.install(choices)
    return {"source": source, "search": search, "seconds": time.perf_counter() - started,
            "choices": [c.to_dict() for c in choices]}


def search_apart(model, device_name: str, max_rows: int, search: str) -> dict:
    """Time this model's projection shapes now and store the choices under the name search (what a start
    with config.model.kernel_search = search loads), replacing any stored there. -> {seconds, choices}."""
    started = time.perf_counter()
    choices = measure(model, max_rows)
    seconds = time.perf_counter() - started
    store.remember(timing_conditions(device_name, search), store_key(model, max_rows), choices, seconds)
    return {"seconds": seconds, "choices": len(choices)}


def store_key(model, max_rows: int) -> str:
    """This model's key in the GPU's store: its projection shapes and the row classes timed."""
    return store.signature(projection_shapes(model), row_classes(max_rows))


def projection_shapes(model) -> list[tuple[str, int, int, bool, str]]:
    """(op, n, k, bias, dtype) of each projection shape measure() times: the shared store's key."""
    return [(op, *weight.shape, bias is not None, str(weight.dtype).removeprefix("torch."))
            for op, weight, bias in model_projections(model)]


def expected_keys(model, max_rows: int) -> set[tuple[str, int, int, int]]:
    """The (op, n, k, rows) measure() chooses for: each projection at each row class, and at one row the
    add-norm folded into qkv's and gate/up's GEMV or not. A stored set is loaded only if it is these."""
    keys = {(op, *weight.shape, rows) for op, weight, _ in model_projections(model) for rows in row_classes(max_rows)}
    return keys | {(kc.NORM_OPS[op], *weight.shape, 1) for op, weight, _ in norm_projections(model)}


def row_classes(max_rows: int) -> list[int]:
    """The row classes a step of at most max_rows rows (max_num_batched_tokens) meets."""
    return [c for c in kc.ROW_CLASSES if c == 1 or c // 2 < max_rows]


def without_entry(model) -> dict:
    """The start-up record of an engine that timed nothing (no compile-cache entry: -O0): the choices an
    earlier engine of this process installed for these shapes, which its projections then run, else the rules."""
    shapes = {(op, *weight.shape) for op, weight, _ in model_projections(model)}
    shapes |= {(kc.NORM_OPS[op], *weight.shape) for op, weight, _ in norm_projections(model)}
    found = [c.to_dict() for c in kc.installed() if (c.op, c.n, c.k) in shapes]
    return {"source": "earlier in this process" if found else "rules", "seconds": 0.0, "choices": found}


def _read(path: Path, conditions: dict, expected: set[tuple[str, int, int, int]]) -> list[KernelChoice] | None:
    """The stored choices, or None: missing, timed under other conditions, unreadable, or not one for each
    (op, n, k, rows) expected."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError(f"a JSON {type(data).__name__}, not an object")
        if not store.timed_under(data, conditions):
            return None
        return store.parse_choices(data["choices"], expected)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, ArithmeticError, RecursionError) as exc:
        log.warning("kernel choices in %s unreadable (%s); measuring again", path, exc)
        return None


def measure(model, max_rows: int) -> list[KernelChoice]:
    """Time every projection shape at every row class up to max_rows (the most rows one step's projection
    sees: max_num_batched_tokens) and choose the fastest of each."""
    from graphbench.runner.kernels import skinny_gemm
    from graphbench.runner.kernels.paged_attention import sm_count
    from graphbench.runner.kernels.pdl import graph_launches

    num_sms = sm_count(torch.cuda.current_device())
    classes = row_classes(max_rows)
    workspaces_before = skinny_gemm.workspace_keys()  # another engine's recordings may hold these
    choices = []
    with graph_launches(), torch.no_grad():
        for op, weight, bias in model_projections(model):
            timer = ProjectionTimer(weight, bias)
            _compile_coarse(op, timer, classes, num_sms)
            for rows in classes:
                choices.append(_choose(op, timer, rows, num_sms))
            del timer
        for op, weight, bias in norm_projections(model):  # at one row: the add-norm folded in or not
            plain = next(c for c in choices if c.key() == (op, *weight.shape, 1))
            choices.append(choose_fold(op, ProjectionTimer(weight, bias), plain))
    skinny_gemm.release_workspaces(keep=workspaces_before)  # the candidates' (the chosen ones come back on use)
    torch.cuda.empty_cache()
    return choices


def _searches(op: str, n: int, k: int, rows: int, dtype: torch.dtype, num_sms: int) -> dict[str, tuple[list, Callable]]:
    """kernel -> (its coarse candidates, their neighbours) for op at this row class."""
    if rows == 1:
        if op == "linear":
            return {"gemv": (kc.gemv_candidates(n, k), lambda b: kc.gemv_neighbours(b, k))}
        return {"gated_gemv": (kc.gated_gemv_candidates(n, k), lambda b: kc.gemv_neighbours(b, k))}
    if dtype not in (torch.bfloat16, torch.float16):  # the skinny GEMM's dtypes
        return {}
    out = {"skinny": (kc.skinny_candidates(n, k, num_sms), lambda b: kc.skinny_neighbours(b, k))}
    if op == "gate_up":
        out["gated_skinny"] = (kc.gated_skinny_candidates(k), kc.gated_skinny_neighbours)
    return out


def _compile_coarse(op: str, timer: ProjectionTimer, classes: list[int], num_sms: int) -> None:
    """Compile every row class's coarse candidates for one projection at once (the most threads busy)."""
    calls = []
    for rows in classes:
        x = torch.empty(rows, timer.k, dtype=timer.dtype, device=timer.copies[0].device)
        for kernel, (coarse, _) in _searches(op, timer.n, timer.k, rows, timer.dtype, num_sms).items():
            calls += [lambda b=b, x=x, kernel=kernel: launcher(op, kernel, b, x, timer.bias)(timer.copies[0])
                      for b in coarse]
    compile_all(calls)


def _choose(op: str, timer: ProjectionTimer, rows: int, num_sms: int) -> KernelChoice:
    """The fastest kernel for op at this row class: graphbench's candidates against cuBLAS; where another
    kernel wins, the LoRA epilogue kernel's fastest blocks too (kernel_choice.EPILOGUE_KERNELS)."""
    n, k = timer.n, timer.k
    torch_us = timer.time(op, "torch", (), rows)
    best = KernelChoice(op, n, k, rows, "torch", (), torch_us, torch_us, 1)
    timed, epilogue = 1, ()
    for kernel, (coarse, neighbours) in _searches(op, n, k, rows, timer.dtype, num_sms).items():
        found = search(lambda b, kernel=kernel: timer.time(op, kernel, b, rows), coarse, neighbours,
                        lambda blocks, kernel=kernel: timer.prepare(op, kernel, blocks, rows))
        if found is None:
            continue
        blocks, us, count = found
        timed += count
        if kernel == kc.EPILOGUE_KERNELS.get(op):
            epilogue = blocks
        if best.us is None or us < best.us:
            best = KernelChoice(op, n, k, rows, kernel, blocks, us, torch_us)
    if best.kernel == kc.EPILOGUE_KERNELS.get(op):
        epilogue = ()  # the chosen blocks are the epilogue's
    return KernelChoice(best.op, n, k, rows, best.kernel, best.blocks, best.us, torch_us, timed, epilogue)
