"""Capture ladder sizes (docs/MACHINERY.md §1.5) and graph counts per cudagraph mode (§1.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphbench.config.modes import CUDAGraphMode
from graphbench.errors import GraphbenchError
from graphbench.ladders import (
    Ladder,
    capture_sizes,
    default_max_capture_size,
    graphs_per_mode,
    ladder_for_top,
    num_graphs,
    pad_to,
    uniform_decode_sizes,
)

SEED_DEFAULT_256 = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))


def test_default_ladder_for_256_seqs_matches_the_seed() -> None:
    ladder = capture_sizes(256)
    assert isinstance(ladder, Ladder)
    assert list(ladder.sizes) == SEED_DEFAULT_256
    assert len(ladder) == 51
    assert ladder.max_capture_size == 512
    assert list(ladder.sizes[:8]) == [1, 2, 4, 8, 16, 24, 32, 40]
    assert list(ladder.sizes[-3:]) == [480, 496, 512]
    assert ladder.warnings == ()


def test_interactivity_adds_25_sizes_at_the_bottom() -> None:
    default = capture_sizes(256)
    inter = capture_sizes(256, performance_mode="interactivity")
    assert len(inter) == 76 == len(default) + 25
    assert list(inter.sizes[:32]) == list(range(1, 33))
    assert set(default.sizes) <= set(inter.sizes)
    assert sorted(set(inter.sizes) - set(default.sizes)) == [3, 5, 6, 7] + list(range(9, 16)) + list(
        range(17, 24)
    ) + list(range(25, 32))


def test_64_seqs_top_is_128_and_200_runs_eager() -> None:
    ladder = capture_sizes(64)
    assert ladder.max_capture_size == 128
    assert list(ladder.sizes) == [1, 2, 4] + list(range(8, 129, 8))
    assert pad_to(ladder.sizes, 200) is None
    assert pad_to(ladder.sizes, 128) == 128
    assert pad_to(ladder.sizes, 9) == 16


def test_small_tops() -> None:
    assert list(capture_sizes(1).sizes) == [1, 2]
    assert list(capture_sizes(2).sizes) == [1, 2, 4]
    assert list(capture_sizes(4).sizes) == [1, 2, 4, 8]
    assert list(capture_sizes(2, performance_mode="interactivity").sizes) == [1, 2, 3, 4]
    assert ladder_for_top(0) == []


def test_blackwell_top_is_1024() -> None:
    assert default_max_capture_size(1024, blackwell=True) == 1024
    assert default_max_capture_size(1024) == 512
    assert default_max_capture_size(256, blackwell=True) == 512  # 2 x 256 is below the cap
    ladder = capture_sizes(1024, blackwell=True)
    assert ladder.max_capture_size == 1024
    assert len(ladder) == 3 + 31 + (1024 - 256) // 16 + 1 == 83
    assert capture_sizes(1024).max_capture_size == 512


def test_max_num_batched_tokens_caps_the_top() -> None:
    ladder = capture_sizes(256, max_num_batched_tokens=100)
    assert max(ladder.sizes) == ladder.max_capture_size == 96
    assert list(ladder.sizes) == [1, 2, 4] + list(range(8, 97, 8))
    assert default_max_capture_size(256, max_num_batched_tokens=100) == 100


def test_max_capture_size_override_and_cap_warning() -> None:
    assert capture_sizes(256, max_capture_size=64).max_capture_size == 64
    ladder = capture_sizes(256, max_capture_size=300, max_num_batched_tokens=200)
    assert ladder.max_capture_size == 200
    assert any("capped" in w for w in ladder.warnings)


def test_speculative_sizes_round_up_to_multiples_of_1_plus_k() -> None:
    # max_num_seqs=4, k=2: top = min(4*3*2, 512) = 24; [1,2,4,8,16,24] -> {3,3,6,9,18,24}
    assert list(capture_sizes(4, num_speculative_tokens=2).sizes) == [3, 6, 9, 18, 24]
    # k=1, 256 seqs: top = min(1024, 512) = 512; 1 and 2 both become 2
    ladder = capture_sizes(256, num_speculative_tokens=1)
    assert ladder.sizes[:3] == (2, 4, 8)
    assert len(ladder) == 50
    assert ladder.max_capture_size == 512


def test_speculative_default_ladder_can_be_empty() -> None:
    # top = min(2*3*2, 512, 2) = 2; [1, 2] -> [3] which is above the cap
    ladder = capture_sizes(2, num_speculative_tokens=2, max_num_batched_tokens=2)
    assert ladder.sizes == ()
    assert ladder.max_capture_size == 0
    assert ladder.warnings and "eager" in ladder.warnings[0]


def test_user_list_is_deduplicated_sorted_and_filtered_with_warnings() -> None:
    ladder = capture_sizes(256, user_sizes=[8, 1, 4, 4, 4096, 2], max_num_batched_tokens=2048)
    assert ladder.sizes == (1, 2, 4, 8)
    assert ladder.max_capture_size == 8
    assert any("duplicate" in w for w in ladder.warnings)
    assert any("4096" in w for w in ladder.warnings)
    clean = capture_sizes(256, user_sizes=[1, 2, 4])
    assert clean.warnings == ()


def test_user_list_all_above_the_cap_is_an_error() -> None:
    with pytest.raises(GraphbenchError, match="max_num_batched_tokens 2048"):
        capture_sizes(256, user_sizes=[4096, 8192], max_num_batched_tokens=2048)


def test_user_list_speculative_rounding_is_capped_by_its_top() -> None:
    ladder = capture_sizes(256, user_sizes=[1, 2, 3, 5], num_speculative_tokens=1)
    assert ladder.sizes == (2, 4)  # 6 would exceed the largest given size, 5
    assert any("multiples of 2" in w for w in ladder.warnings)
    with pytest.raises(GraphbenchError, match="no capture size remains"):
        capture_sizes(256, user_sizes=[1, 2, 3], num_speculative_tokens=3)


def test_user_list_with_max_capture_size_must_agree() -> None:
    assert capture_sizes(256, user_sizes=[1, 8], max_capture_size=8).sizes == (1, 8)
    with pytest.raises(GraphbenchError, match="must equal"):
        capture_sizes(256, user_sizes=[1, 8], max_capture_size=16)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_num_seqs": 0},
        {"max_num_seqs": -3},
        {"max_num_seqs": True},
        {"max_num_seqs": 8, "performance_mode": "fast"},
        {"max_num_seqs": 8, "num_speculative_tokens": -1},
        {"max_num_seqs": 8, "max_num_batched_tokens": 0},
        {"max_num_seqs": 8, "max_capture_size": 0},
        {"max_num_seqs": 8, "user_sizes": []},
        {"max_num_seqs": 8, "user_sizes": [0, 1]},
        {"max_num_seqs": 8, "user_sizes": [-4]},
        {"max_num_seqs": 8, "user_sizes": [1.5]},
        {"max_num_seqs": 8, "user_sizes": "1,2"},
    ],
)
def test_bad_arguments_raise_graphbench_error(kwargs: dict) -> None:
    with pytest.raises(GraphbenchError):
        capture_sizes(**kwargs)


def test_graph_counts_for_256_seqs() -> None:
    default = capture_sizes(256)
    assert len(uniform_decode_sizes(default, 256)) == 35  # 1,2,4, 8..248 (31), 256
    counts = graphs_per_mode(default, 256)
    assert counts == {
        CUDAGraphMode.NONE: 0,
        CUDAGraphMode.PIECEWISE: 51,
        CUDAGraphMode.FULL: 51,
        CUDAGraphMode.FULL_DECODE_ONLY: 35,
        CUDAGraphMode.FULL_AND_PIECEWISE: 86,
    }
    inter = capture_sizes(256, performance_mode="interactivity")
    assert num_graphs("FULL_DECODE_ONLY", inter, 256) == 32 + 27 + 1
    assert num_graphs("full_and_piecewise", inter, 256) == 76 + 60


def test_uniform_decode_sizes_with_speculation() -> None:
    # decode_query_len 2, max_num_seqs 3: multiples of 2 in [2, 6]
    assert uniform_decode_sizes([1, 2, 3, 4, 6, 8], 3, 2) == (2, 4, 6)
    assert num_graphs(CUDAGraphMode.FULL_AND_PIECEWISE, [1, 2, 3, 4, 6, 8], 3, 2) == 6 + 3
    with pytest.raises(GraphbenchError):
        num_graphs("SOMETIMES", [1], 1)
    with pytest.raises(GraphbenchError):
        uniform_decode_sizes([1], 0)


ladder_args = st.fixed_dictionaries(
    {
        "max_num_seqs": st.integers(1, 1200),
        "performance_mode": st.sampled_from(["default", "interactivity"]),
        "num_speculative_tokens": st.integers(0, 5),
        "max_num_batched_tokens": st.none() | st.integers(1, 4096),
        "blackwell": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None)
@given(ladder_args)
def test_ladder_properties(args: dict) -> None:
    ladder = capture_sizes(**args)
    sizes = list(ladder.sizes)
    k1 = 1 + args["num_speculative_tokens"]
    cap = min(args["max_num_seqs"] * k1 * 2, 1024 if args["blackwell"] else 512)
    if args["max_num_batched_tokens"] is not None:
        cap = min(cap, args["max_num_batched_tokens"])
    assert sizes == sorted(set(sizes))
    assert all(0 < s <= cap for s in sizes)
    assert ladder.max_capture_size == (sizes[-1] if sizes else 0)
    assert all(s % k1 == 0 for s in sizes)
    for n in range(1, ladder.max_capture_size + 1):
        padded = pad_to(sizes, n)
        assert padded is not None and padded >= n
    assert pad_to(sizes, ladder.max_capture_size + 1) is None
    if k1 == 1:
        assert len(sizes) > 0 and sizes[0] == 1


@settings(max_examples=100, deadline=None)
@given(ladder_args)
def test_graph_count_properties(args: dict) -> None:
    ladder = capture_sizes(**args)
    k1 = 1 + args["num_speculative_tokens"]
    counts = graphs_per_mode(ladder, args["max_num_seqs"], k1)
    uniform = [s for s in ladder.sizes if k1 <= s <= k1 * args["max_num_seqs"] and s % k1 == 0]
    assert counts[CUDAGraphMode.NONE] == 0
    assert counts[CUDAGraphMode.PIECEWISE] == counts[CUDAGraphMode.FULL] == len(ladder)
    assert counts[CUDAGraphMode.FULL_DECODE_ONLY] == len(uniform) <= len(ladder)
    assert counts[CUDAGraphMode.FULL_AND_PIECEWISE] == len(ladder) + len(uniform)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-5, 5000), min_size=1, max_size=40),
    st.none() | st.integers(1, 4096),
    st.integers(0, 3),
)
def test_user_list_properties(user: list[int], cap: int | None, k: int) -> None:
    try:
        ladder = capture_sizes(64, user_sizes=user, max_num_batched_tokens=cap, num_speculative_tokens=k)
    except GraphbenchError:
        valid = [s for s in user if s > 0]
        if len(valid) == len(user):
            kept = [s for s in valid if cap is None or s <= cap]
            top = max(kept, default=0)
            # the only other errors: everything above the cap, or nothing left after rounding
            assert not kept or not [s for s in kept if -(-s // (k + 1)) * (k + 1) <= top]
        return
    assert all(s > 0 for s in user)
    sizes = list(ladder.sizes)
    assert sizes == sorted(set(sizes)) and sizes
    assert all(s % (k + 1) == 0 for s in sizes)
    assert all(cap is None or s <= cap for s in sizes)
    assert max(sizes) <= max(user)
    if k == 0:
        assert set(sizes) == {s for s in user if cap is None or s <= cap}


def test_user_list_names_the_sizes_no_decode_batch_uses() -> None:
    ladder = capture_sizes(64, user_sizes=[1, 64, 65, 256], max_num_batched_tokens=2048)
    assert ladder.sizes == (1, 64, 65, 256)  # kept: mixed batches of up to 2048 tokens use them
    assert ladder.warnings == (
        "no decode batch uses the capture sizes above max_num_seqs 64 x decode_query_len 1 = 64 tokens: 65, 256 "
        "(only mixed (prefill) batches can; FULL_DECODE_ONLY captures no graph for them)",)
    spec = capture_sizes(64, user_sizes=[2, 128, 130], num_speculative_tokens=1, max_num_batched_tokens=2048)
    assert spec.warnings == (
        "no decode batch uses the capture sizes above max_num_seqs 64 x decode_query_len 2 = 128 tokens: 130 "
        "(only mixed (prefill) batches can; FULL_DECODE_ONLY captures no graph for them)",)
    assert capture_sizes(64, user_sizes=[1, 2, 64], max_num_batched_tokens=2048).warnings == ()
    assert capture_sizes(64).warnings == ()  # the default ladder's 2x top is by design
