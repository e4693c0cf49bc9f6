"""resolve_cudagraph_mode (docs/MACHINERY.md §1.4 + graphbench's rules) against an independent reference.

Every requested mode x every CudagraphSupport x compiling x attention split x decode_query_len
1/3 x device cuda/cpu. The reference is written from the rules alone, with a hand-written
(decode part, mixed part) table; it uses none of CUDAGraphMode's helper methods.
"""

from __future__ import annotations

import itertools

import pytest

from graphbench.config.modes import CUDAGraphMode
from graphbench.errors import GraphbenchError
from graphbench.runner.attention.backend import CudagraphSupport
from graphbench.runner.dispatcher import ModeResolution, resolve_cudagraph_mode

NEVER = CudagraphSupport.NEVER
SINGLE = CudagraphSupport.UNIFORM_SINGLE_TOKEN_DECODE
UNIFORM = CudagraphSupport.UNIFORM_BATCH
ALWAYS = CudagraphSupport.ALWAYS

PARTS = {  # mode -> (uniform-decode part, mixed part), docs/MACHINERY.md §1.3
    "NONE": ("NONE", "NONE"),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE"),
    "FULL": ("FULL", "FULL"),
    "FULL_DECODE_ONLY": ("FULL", "NONE"),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE"),
}
ERROR = "error"


def reference(requested: str, support: CudagraphSupport, compiling: bool, split: bool, dql: int,
              device: str) -> tuple[str, bool]:
    """(resolved mode name or ERROR, whether any downgrade rule fired)."""
    if requested == "NONE":
        return "NONE", False
    if device != "cuda":
        return "NONE", True
    split_ok = compiling and split
    mode, fired = requested, False

    # rule 0 (graphbench): piecewise graphs need the compiler to split at attention
    decode, mixed = PARTS[mode]
    if "PIECEWISE" in (decode, mixed) and not split_ok:
        fired = True
        if compiling:
            mode = "FULL"
        elif decode == "FULL":
            mode = "FULL_DECODE_ONLY"
        else:
            mode = "NONE"

    # rule 1: a full graph of mixed batches needs ALWAYS
    decode, mixed = PARTS[mode]
    if mixed == "FULL" and support != ALWAYS:
        if support == NEVER:
            return ERROR, True
        fired = True
        mode = "FULL_AND_PIECEWISE" if split_ok else "FULL_DECODE_ONLY"

    # rule 2: a full decode graph needs at least some support
    decode, mixed = PARTS[mode]
    if decode == "FULL" and support == NEVER:
        fired = True
        mode = "PIECEWISE" if split_ok else "NONE"

    # rule 3: multi-token uniform decode (speculative) needs UNIFORM_BATCH
    decode, mixed = PARTS[mode]
    if decode == "FULL" and decode != mixed and dql > 1 and support < UNIFORM:
        fired = True
        mode = "PIECEWISE" if split_ok else "NONE"
    return mode, fired


COMBOS = list(itertools.product(
    [m.value for m in CUDAGraphMode], list(CudagraphSupport), [True, False], [True, False], [1, 3], ["cuda", "cpu"],
))


def _id(c) -> str:
    mode, support, compiling, split, dql, device = c
    return f"{mode}-{support.name}-{'compile' if compiling else 'eager'}-{'split' if split else 'nosplit'}-q{dql}-{device}"


def test_combination_count() -> None:
    assert len(COMBOS) == 5 * 4 * 2 * 2 * 2 * 2 == 320


@pytest.mark.parametrize("combo", COMBOS, ids=[_id(c) for c in COMBOS])
def test_resolution_matches_reference(combo) -> None:
    mode, support, compiling, split, dql, device = combo
    requested = CUDAGraphMode(mode)
    want, fired = reference(mode, support, compiling, split, dql, device)
    kwargs = {"compiling": compiling, "attention_split": split, "decode_query_len": dql, "device_type": device,
              "backend_name": "testattn"}
    if want == ERROR:
        with pytest.raises(GraphbenchError) as info:
            resolve_cudagraph_mode(requested, support, **kwargs)
        msg = str(info.value)
        assert "\n" not in msg and "testattn" in msg and "NEVER" in msg
        return
    res = resolve_cudagraph_mode(requested, support, **kwargs)
    assert isinstance(res, ModeResolution)
    assert res.requested == requested
    assert res.resolved == CUDAGraphMode(want), f"{_id(combo)}: got {res.resolved.value}, want {want} ({res.reason})"
    assert bool(res.reason) == fired, f"{_id(combo)}: reason {res.reason!r}"
    assert bool(res.reason) == (res.resolved != requested)
    if fired and device == "cuda":  # a rule's reason names the step it took
        assert res.resolved.value in res.reason and requested.value in res.reason
    if device == "cpu" and requested != CUDAGraphMode.NONE:
        assert res.resolved == CUDAGraphMode.NONE and "CUDA device" in res.reason and "cpu" in res.reason
    assert res.to_dict() == {"requested": mode, "resolved": res.resolved.value, "reason": res.reason}


def test_resolved_mode_never_needs_more_than_it_has() -> None:
    """Whatever comes out is recordable with the given support and compilation (a closure check)."""
    for mode, support, compiling, split, dql, device in COMBOS:
        try:
            res = resolve_cudagraph_mode(CUDAGraphMode(mode), support, compiling=compiling, attention_split=split,
                                         decode_query_len=dql, device_type=device)
        except GraphbenchError:
            continue
        decode, mixed = PARTS[res.resolved.value]
        if device != "cuda":
            assert res.resolved == CUDAGraphMode.NONE
        if "PIECEWISE" in (decode, mixed):
            assert compiling and split
        if mixed == "FULL":
            assert support == ALWAYS
        if decode == "FULL":
            assert support != NEVER
            if dql > 1 and decode != mixed:
                assert support >= UNIFORM
        # resolving again changes nothing
        again = resolve_cudagraph_mode(res.resolved, support, compiling=compiling, attention_split=split,
                                       decode_query_len=dql, device_type=device)
        assert again.resolved == res.resolved and again.reason == ""


# --- a few exact cases, by hand -------------------------------------------------------------


def _resolve(mode: str, support: CudagraphSupport, *, compiling=True, split=True, dql=1, device="cuda"):
    return resolve_cudagraph_mode(CUDAGraphMode(mode), support, compiling=compiling, attention_split=split,
                                  decode_query_len=dql, device_type=device, backend_name="b")


def test_default_mode_with_full_support_is_kept() -> None:
    res = _resolve("FULL_AND_PIECEWISE", ALWAYS)
    assert (res.resolved.value, res.reason) == ("FULL_AND_PIECEWISE", "")


def test_full_with_uniform_support_becomes_full_and_piecewise() -> None:
    assert _resolve("FULL", UNIFORM).resolved.value == "FULL_AND_PIECEWISE"
    assert _resolve("FULL", UNIFORM, split=False).resolved.value == "FULL_DECODE_ONLY"
    assert _resolve("FULL", SINGLE, compiling=False).resolved.value == "FULL_DECODE_ONLY"


def test_full_with_never_support_is_an_error() -> None:
    with pytest.raises(GraphbenchError):
        _resolve("FULL", NEVER)
    with pytest.raises(GraphbenchError):
        _resolve("FULL", NEVER, compiling=False)


def test_decode_graphs_with_never_support() -> None:
    assert _resolve("FULL_AND_PIECEWISE", NEVER).resolved.value == "PIECEWISE"
    assert _resolve("FULL_DECODE_ONLY", NEVER).resolved.value == "PIECEWISE"
    assert _resolve("FULL_DECODE_ONLY", NEVER, compiling=False).resolved.value == "NONE"


def test_speculative_decode_needs_uniform_batch() -> None:
    assert _resolve("FULL_AND_PIECEWISE", SINGLE, dql=3).resolved.value == "PIECEWISE"
    assert _resolve("FULL_AND_PIECEWISE", SINGLE, dql=1).resolved.value == "FULL_AND_PIECEWISE"
    assert _resolve("FULL_AND_PIECEWISE", UNIFORM, dql=3).resolved.value == "FULL_AND_PIECEWISE"
    assert _resolve("FULL_DECODE_ONLY", SINGLE, dql=3, compiling=False).resolved.value == "NONE"


def test_piecewise_without_compilation_or_split() -> None:
    assert _resolve("PIECEWISE", ALWAYS, compiling=False).resolved.value == "NONE"
    assert _resolve("PIECEWISE", ALWAYS, split=False).resolved.value == "FULL"
    assert _resolve("FULL_AND_PIECEWISE", ALWAYS, compiling=False).resolved.value == "FULL_DECODE_ONLY"
    assert _resolve("FULL_AND_PIECEWISE", UNIFORM, split=False).resolved.value == "FULL_DECODE_ONLY"
    res = _resolve("PIECEWISE", ALWAYS, compiling=False)
    assert "compilation is off" in res.reason


def test_cpu_and_none() -> None:
    res = _resolve("FULL_AND_PIECEWISE", ALWAYS, device="cpu")
    assert res.resolved.value == "NONE" and "CUDA device" in res.reason
    res = _resolve("FULL", NEVER, device="cpu")  # the device check comes first: no error
    assert res.resolved.value == "NONE"
    res = _resolve("NONE", NEVER, device="cpu")
    assert (res.resolved.value, res.reason) == ("NONE", "")
