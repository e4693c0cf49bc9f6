"""CudagraphDispatcher (docs/MACHINERY.md §1.2, §1.3) against an independent reference, exhaustively on the CPU.

The reference below is written from docs/MACHINERY.md alone: a hand-written mode table, a linear
scan for padding and an explicit key list. It uses nothing from dispatcher.py, config/modes.py
(beyond the enum values) or ladders/graphs.py.
"""

from __future__ import annotations

import pytest

from graphbench.config.modes import CUDAGraphMode
from graphbench.ladders import capture_sizes, num_graphs
from graphbench.runner.dispatcher import CudagraphDispatcher
from graphbench.runner.scheduler import BatchDescriptor

NONE, PIECEWISE, FULL = CUDAGraphMode.NONE, CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL
FDO, FAP = CUDAGraphMode.FULL_DECODE_ONLY, CUDAGraphMode.FULL_AND_PIECEWISE
MODES = [NONE, PIECEWISE, FULL, FDO, FAP]

# docs/MACHINERY.md §1.3, written out by hand: mode -> (uniform-decode batches, mixed/prefill batches).
REF_TABLE: dict[str, tuple[str, str]] = {
    "NONE": ("NONE", "NONE"),
    "PIECEWISE": ("PIECEWISE", "PIECEWISE"),
    "FULL": ("FULL", "FULL"),
    "FULL_DECODE_ONLY": ("FULL", "NONE"),
    "FULL_AND_PIECEWISE": ("FULL", "PIECEWISE"),
}


# ---------------------------------------------------------------------------------------------
# The reference
# ---------------------------------------------------------------------------------------------


def ref_uniform_sizes(sizes: list[int], max_num_seqs: int, dql: int) -> list[int]:
    """Ladder sizes with a uniform FULL key: multiples of dql in [dql, dql * max_num_seqs]."""
    out = []
    for s in sizes:
        if s < dql:
            continue
        if s > dql * max_num_seqs:
            continue
        if s % dql != 0:
            continue
        out.append(s)
    return out


def ref_keys(mode: CUDAGraphMode, sizes: list[int], max_num_seqs: int, dql: int) -> dict[str, set]:
    """Every key recorded, as {"FULL": {...}, "PIECEWISE": {...}} of BatchDescriptors (no LoRA)."""
    decode, mixed = REF_TABLE[mode.value]
    keys: dict[str, set] = {"FULL": set(), "PIECEWISE": set()}
    if mixed != "NONE":
        for s in sizes:
            keys[mixed].add(BatchDescriptor(s, None, False, False))
    if decode == "FULL" and decode != mixed:  # a separate decode routine: exact uniform keys
        for s in ref_uniform_sizes(sizes, max_num_seqs, dql):
            keys["FULL"].add(BatchDescriptor(s, s // dql, True, False))
    return keys


def ref_pad(sizes: list[int], n: int) -> int | None:
    best = None
    for s in sizes:
        if s >= n and (best is None or s < best):
            best = s
    return best


def ref_dispatch(mode: CUDAGraphMode, sizes: list[int], max_num_seqs: int, dql: int,
                 desc: BatchDescriptor) -> tuple[CUDAGraphMode, BatchDescriptor]:
    if mode.value == "NONE" or not sizes or desc.num_tokens > max(sizes):
        return NONE, desc
    padded = ref_pad(sizes, desc.num_tokens)
    assert padded is not None
    keys = ref_keys(mode, sizes, max_num_seqs, dql)
    if desc.uniform:
        exact = BatchDescriptor(padded, padded // dql, True, desc.has_lora)
        if exact in keys["FULL"]:
            return FULL, exact
    relaxed = BatchDescriptor(padded, None, False, desc.has_lora)
    if relaxed in keys["FULL"]:
        return FULL, relaxed
    if relaxed in keys["PIECEWISE"]:
        return PIECEWISE, relaxed
    return NONE, desc


# ---------------------------------------------------------------------------------------------
# Ladders under test
# ---------------------------------------------------------------------------------------------

# name -> (sizes, max_num_seqs, decode_query_len)
LADDERS: dict[str, tuple[list[int], int, int]] = {
    "default-mns8": (list(capture_sizes(8).sizes), 8, 1),
    "default-mns64": (list(capture_sizes(64).sizes), 64, 1),
    "default-mns256": (list(capture_sizes(256).sizes), 256, 1),
    "interactivity-mns64": (list(capture_sizes(64, performance_mode="interactivity").sizes), 64, 1),
    "spec-k1-mns64": (list(capture_sizes(64, num_speculative_tokens=1).sizes), 64, 2),
    "spec-k3-mns64": (list(capture_sizes(64, num_speculative_tokens=3).sizes), 64, 4),
    "spec-k3-mns8": (list(capture_sizes(8, num_speculative_tokens=3).sizes), 8, 4),
    "custom-3-7-64-mns8": (list(capture_sizes(8, user_sizes=[3, 7, 64]).sizes), 8, 1),
    "custom-3-7-64-mns256": (list(capture_sizes(256, user_sizes=[64, 3, 7, 7]).sizes), 256, 1),
    "custom-3-7-64-spec-k1-mns8": (list(capture_sizes(8, user_sizes=[3, 7, 64], num_speculative_tokens=1).sizes), 8, 2),
}


def test_ladders_under_test_are_what_the_spec_says() -> None:
    """Sanity of the inputs (so the exhaustive tests below cover what they claim to)."""
    assert LADDERS["default-mns8"][0] == [1, 2, 4, 8, 16]
    assert max(LADDERS["default-mns64"][0]) == 128
    assert len(LADDERS["default-mns256"][0]) == 51 and max(LADDERS["default-mns256"][0]) == 512
    assert len(LADDERS["default-mns64"][0]) == 19 and len(LADDERS["interactivity-mns64"][0]) == 44
    assert LADDERS["interactivity-mns64"][0][:32] == list(range(1, 33))
    assert all(s % 2 == 0 for s in LADDERS["spec-k1-mns64"][0]) and max(LADDERS["spec-k1-mns64"][0]) == 256
    assert all(s % 4 == 0 for s in LADDERS["spec-k3-mns64"][0]) and max(LADDERS["spec-k3-mns64"][0]) == 512
    assert LADDERS["spec-k3-mns8"][0] == [4, 8, 16, 24, 32, 40, 48, 56, 64]
    assert LADDERS["custom-3-7-64-mns8"][0] == [3, 7, 64]
    assert LADDERS["custom-3-7-64-mns256"][0] == [3, 7, 64]
    assert LADDERS["custom-3-7-64-spec-k1-mns8"][0] == [4, 8, 64]


def descriptors(sizes: list[int], dql: int):
    """Every uniform (n % dql == 0) and mixed descriptor for n = 1 .. top + 50, without LoRA."""
    top = max(sizes)
    for n in range(1, top + 51):
        if n % dql == 0:
            yield BatchDescriptor(n, n // dql, True, False)
        # mixed: some request count (a prefill chunk plus decodes); it must not matter
        yield BatchDescriptor(n, max(1, n // 3), False, False)


CASES = [(name, mode) for name in LADDERS for mode in MODES]


@pytest.mark.parametrize("name,mode", CASES, ids=[f"{n}-{m.value}" for n, m in CASES])
def test_dispatch_matches_reference_for_every_batch(name: str, mode: CUDAGraphMode) -> None:
    sizes, mns, dql = LADDERS[name]
    d = CudagraphDispatcher(mode, sizes, mns, decode_query_len=dql)
    top = max(sizes)
    decode_part, mixed_part = REF_TABLE[mode.value]
    checked = 0
    for desc in descriptors(sizes, dql):
        n = desc.num_tokens
        got_mode, got_desc = d.dispatch(desc)
        want = ref_dispatch(mode, sizes, mns, dql, desc)
        assert (got_mode, got_desc) == want, f"{name} {mode.value} {desc}: got {(got_mode, got_desc)}, want {want}"
        assert got_mode in (NONE, PIECEWISE, FULL)
        if got_mode == NONE:
            # eager: unpadded, the very descriptor that came in
            assert got_desc == desc
        else:
            p = got_desc.num_tokens
            assert p >= n and p in sizes
            assert not any(n <= s < p for s in sizes), "not the smallest rung >= n"
            if got_desc.uniform:
                assert got_mode == FULL and got_desc.num_reqs == p // dql and desc.uniform
            else:
                assert got_desc.num_reqs is None
            assert got_desc.has_lora is False
        # coarse rules, stated directly
        if mode == NONE or n > top:
            assert (got_mode, got_desc) == (NONE, desc)
        elif not desc.uniform:
            assert got_mode.value == mixed_part
        if mode == FDO and not desc.uniform:
            assert got_mode == NONE
        if mode == FULL and n <= top:
            assert got_mode == FULL and got_desc == BatchDescriptor(ref_pad(sizes, n), None, False, False)
        if mode == PIECEWISE and n <= top:
            assert got_mode == PIECEWISE and got_desc == BatchDescriptor(ref_pad(sizes, n), None, False, False)
        if desc.uniform and n <= top and decode_part == "FULL":
            p = ref_pad(sizes, n)
            if mode in (FDO, FAP) and p in ref_uniform_sizes(sizes, mns, dql):
                assert (got_mode, got_desc) == (FULL, BatchDescriptor(p, p // dql, True, False))
        checked += 1
    assert checked >= top + 50


@pytest.mark.parametrize("name,mode", CASES, ids=[f"{n}-{m.value}" for n, m in CASES])
def test_keys_and_capture_list(name: str, mode: CUDAGraphMode) -> None:
    sizes, mns, dql = LADDERS[name]
    d = CudagraphDispatcher(mode, sizes, mns, decode_query_len=dql)
    want = ref_keys(mode, sizes, mns, dql)
    assert {m.value: set(k) for m, k in d.keys.items() if k} == {m: k for m, k in want.items() if k}
    total = sum(len(k) for k in d.keys.values())
    assert total == sum(len(k) for k in want.values())
    assert total == num_graphs(mode, sizes, mns, dql)
    assert sum(d.num_graphs().values()) == total
    assert d.num_graphs() == {"FULL": len(want["FULL"]), "PIECEWISE": len(want["PIECEWISE"])}

    cl = d.capture_list()
    assert len(cl) == total
    assert len(set(cl)) == len(cl), "a key is recorded twice"
    assert set(cl) == {(FULL, k) for k in want["FULL"]} | {(PIECEWISE, k) for k in want["PIECEWISE"]}
    tokens = [desc.num_tokens for _, desc in cl]
    assert tokens == sorted(tokens, reverse=True), "capture list is not largest first"
    if mode == NONE:
        assert cl == [] and d.dispatch(BatchDescriptor(1, 1, True, False)) == (NONE, BatchDescriptor(1, 1, True, False))


def test_lora_doubles_the_keys_and_separates_them() -> None:
    sizes, mns, dql = LADDERS["default-mns64"]
    plain = CudagraphDispatcher(FAP, sizes, mns, decode_query_len=dql)
    lora = CudagraphDispatcher(FAP, sizes, mns, decode_query_len=dql, has_lora=True)
    assert sum(lora.num_graphs().values()) == 2 * sum(plain.num_graphs().values())
    assert len(lora.capture_list()) == 2 * len(plain.capture_list())
    assert lora.dispatch(BatchDescriptor(9, 9, True, True)) == (FULL, BatchDescriptor(16, 16, True, True))
    assert lora.dispatch(BatchDescriptor(9, 3, False, True)) == (PIECEWISE, BatchDescriptor(16, None, False, True))
    assert lora.dispatch(BatchDescriptor(9, 9, True, False)) == (FULL, BatchDescriptor(16, 16, True, False))
    # a LoRA batch never replays a recording made without adapters
    desc = BatchDescriptor(9, 9, True, True)
    assert plain.dispatch(desc) == (NONE, desc)


# ---------------------------------------------------------------------------------------------
# Hand-written exact cases
# ---------------------------------------------------------------------------------------------


def test_seed_example_full_and_piecewise_256() -> None:
    d = CudagraphDispatcher(FAP, list(capture_sizes(256).sizes), 256)
    assert d.dispatch(BatchDescriptor(9, 9, True, False)) == (FULL, BatchDescriptor(16, 16, True, False))
    assert d.dispatch(BatchDescriptor(9, 2, False, False)) == (PIECEWISE, BatchDescriptor(16, None, False, False))
    big = BatchDescriptor(600, 600, True, False)
    assert d.dispatch(big) == (NONE, big)
    assert d.dispatch(BatchDescriptor(512, 512, False, False)) == (PIECEWISE, BatchDescriptor(512, None, False, False))
    # uniform 300 pads to 304 > 256 = max_num_seqs: no uniform key, relaxed piecewise
    assert d.dispatch(BatchDescriptor(300, 300, True, False)) == (PIECEWISE, BatchDescriptor(304, None, False, False))
    assert d.dispatch(BatchDescriptor(256, 256, True, False)) == (FULL, BatchDescriptor(256, 256, True, False))
    assert d.num_graphs() == {"FULL": 35, "PIECEWISE": 51}
    assert sum(d.num_graphs().values()) == 86
    assert d.capture_list()[0] == (PIECEWISE, BatchDescriptor(512, None, False, False))
    assert d.capture_list()[-1] == (PIECEWISE, BatchDescriptor(1, None, False, False))
    assert (FULL, BatchDescriptor(1, 1, True, False)) in d.capture_list()[-2:]


def test_seed_example_mns64_200_is_eager() -> None:
    d = CudagraphDispatcher(FAP, list(capture_sizes(64).sizes), 64)
    assert d.max_capture_size == 128
    desc = BatchDescriptor(200, 5, False, False)
    assert d.dispatch(desc) == (NONE, desc)
    assert d.dispatch(BatchDescriptor(100, 100, True, False)) == (PIECEWISE, BatchDescriptor(104, None, False, False))
    assert d.dispatch(BatchDescriptor(60, 60, True, False)) == (FULL, BatchDescriptor(64, 64, True, False))


def test_full_decode_only_runs_mixed_eager() -> None:
    d = CudagraphDispatcher(FDO, list(capture_sizes(256).sizes), 256)
    mixed = BatchDescriptor(9, 3, False, False)
    assert d.dispatch(mixed) == (NONE, mixed)
    assert d.dispatch(BatchDescriptor(9, 9, True, False)) == (FULL, BatchDescriptor(16, 16, True, False))
    assert d.num_graphs() == {"FULL": 35, "PIECEWISE": 0}
    beyond = BatchDescriptor(300, 300, True, False)  # pads to 304 > max_num_seqs: no uniform key
    assert d.dispatch(beyond) == (NONE, beyond)


def test_full_mode_uses_relaxed_keys_for_uniform_batches() -> None:
    d = CudagraphDispatcher(FULL, list(capture_sizes(256).sizes), 256)
    assert d.dispatch(BatchDescriptor(9, 9, True, False)) == (FULL, BatchDescriptor(16, None, False, False))
    assert d.num_graphs() == {"FULL": 51, "PIECEWISE": 0}


def test_speculative_uniform_keys() -> None:
    # k=1: decode_query_len 2; 3 requests x 2 tokens = 6 -> padded 8 = 4 requests
    d = CudagraphDispatcher(FAP, list(capture_sizes(64, num_speculative_tokens=1).sizes), 64, decode_query_len=2)
    assert d.dispatch(BatchDescriptor(6, 3, True, False)) == (FULL, BatchDescriptor(8, 4, True, False))
    assert d.dispatch(BatchDescriptor(5, 2, False, False)) == (PIECEWISE, BatchDescriptor(8, None, False, False))
    assert d.dispatch(BatchDescriptor(1, 1, False, False)) == (PIECEWISE, BatchDescriptor(2, None, False, False))
    # 128 = 2 * 64 is the last uniform key; 136 is above it
    assert d.dispatch(BatchDescriptor(128, 64, True, False)) == (FULL, BatchDescriptor(128, 64, True, False))
    assert d.dispatch(BatchDescriptor(130, 65, True, False)) == (PIECEWISE, BatchDescriptor(136, None, False, False))
    # k=3: decode_query_len 4, ladder [4, 8, 16, ...]
    d = CudagraphDispatcher(FDO, list(capture_sizes(8, num_speculative_tokens=3).sizes), 8, decode_query_len=4)
    assert d.dispatch(BatchDescriptor(12, 3, True, False)) == (FULL, BatchDescriptor(16, 4, True, False))
    assert d.num_graphs() == {"FULL": 5, "PIECEWISE": 0}  # 4, 8, 16, 24, 32 (<= 4 * 8)


def test_custom_ladder() -> None:
    d = CudagraphDispatcher(FAP, [64, 3, 7], 8)
    assert d.capture_sizes == [3, 7, 64]
    assert d.dispatch(BatchDescriptor(1, 1, True, False)) == (FULL, BatchDescriptor(3, 3, True, False))
    assert d.dispatch(BatchDescriptor(5, 5, True, False)) == (FULL, BatchDescriptor(7, 7, True, False))
    # 8 requests pad to 64 tokens, above 8 * 1: no uniform key
    assert d.dispatch(BatchDescriptor(8, 8, True, False)) == (PIECEWISE, BatchDescriptor(64, None, False, False))
    desc = BatchDescriptor(65, 65, True, False)
    assert d.dispatch(desc) == (NONE, desc)
    assert d.num_graphs() == {"FULL": 2, "PIECEWISE": 3}
    assert [desc.num_tokens for _, desc in d.capture_list()] == [64, 7, 7, 3, 3]


def test_mode_none_keeps_no_sizes() -> None:
    d = CudagraphDispatcher(NONE, [1, 2, 4], 4)
    assert d.capture_sizes == [] and d.capture_list() == [] and d.num_graphs() == {"FULL": 0, "PIECEWISE": 0}
    desc = BatchDescriptor(2, 2, True, False)
    assert d.dispatch(desc) == (NONE, desc)


# ---------------------------------------------------------------------------------------------
# Padding paid over a stream of batches = the ladder's prediction for its histogram
# ---------------------------------------------------------------------------------------------


def _stream(seed: int, steps: int, max_num_seqs: int) -> list[BatchDescriptor]:
    """A serving-like stream: mostly uniform decode batches of a drifting size, now and then a mixed
    step (a prefill chunk with the decodes), some of them above the ladder's top."""
    import random

    rng = random.Random(seed)
    out, running = [], rng.randint(1, max_num_seqs)
    for _ in range(steps):
        running = min(max_num_seqs, max(1, running + rng.choice((-2, -1, 0, 0, 1, 2))))
        if rng.random() < 0.1:
            chunk = rng.choice((7, 33, 100, 250))
            out.append(BatchDescriptor(running + chunk, running + 1, False, False))
        else:
            out.append(BatchDescriptor(running, running, True, False))
    return out


def _records(d: CudagraphDispatcher, stream: list[BatchDescriptor]):
    """Step records as the engine writes them: an eager step's padded tokens are its own (model_runner.py)."""
    from graphbench.runner.records import StepRecord

    records = []
    for desc in stream:
        mode, padded = d.dispatch(desc)
        records.append(StepRecord(desc, 0.001, mode.value, padded.num_tokens if mode != NONE else desc.num_tokens))
    return records


@pytest.mark.parametrize("mode", [FAP, PIECEWISE, FULL], ids=lambda m: m.value)
@pytest.mark.parametrize("ladder", ["default-mns64", "interactivity-mns64", "custom-3-7-64-mns8"])
def test_padding_paid_over_a_stream_is_the_ladders_prediction_for_its_histogram(mode, ladder) -> None:
    from collections import Counter

    from graphbench.bench.metrics import step_metrics
    from graphbench.ladders.padding import token_waste

    sizes, mns, dql = LADDERS[ladder]
    stream = _stream(seed=7, steps=2000, max_num_seqs=mns)
    paid = step_metrics(_records(CudagraphDispatcher(mode, sizes, mns, decode_query_len=dql), stream))
    predicted = 100 * token_waste(sizes, Counter(d.num_tokens for d in stream))
    assert abs(paid["padding_token_pct"] - predicted) < 0.5, (paid["padding_token_pct"], predicted)
    assert paid["padding_token_pct"] > 1.0  # the stream does pad (1.9% on the interactivity ladder, 41% on 3, 7, 64)
    assert 0 < paid["eager_fraction"] < 0.1  # and some mixed steps ran above the top, eager


def test_full_decode_only_pays_less_than_the_prediction() -> None:
    """The prediction pads every batch up to the top; FULL_DECODE_ONLY runs mixed batches eager, unpadded."""
    from collections import Counter

    from graphbench.bench.metrics import step_metrics
    from graphbench.ladders.padding import token_waste

    sizes, mns, dql = LADDERS["default-mns64"]
    stream = _stream(seed=3, steps=2000, max_num_seqs=mns)
    paid = step_metrics(_records(CudagraphDispatcher(FDO, sizes, mns, decode_query_len=dql), stream))
    decode_only = Counter(d.num_tokens for d in stream if d.uniform)
    mixed_tokens = sum(d.num_tokens for d in stream if not d.uniform)
    # paid: the decode steps' padding over all the tokens computed (mixed ones unpadded)
    pad = sum(c * ((min(s for s in sizes if s >= n)) - n) for n, c in decode_only.items())
    total = sum(c * min(s for s in sizes if s >= n) for n, c in decode_only.items()) + mixed_tokens
    assert paid["padding_token_pct"] == pytest.approx(100 * pad / total)
    assert paid["padding_token_pct"] < 100 * token_waste(sizes, Counter(d.num_tokens for d in stream))
