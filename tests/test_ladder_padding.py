"""Padding lookup, average waste over batch-size distributions, and distribution files."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphbench.errors import GraphbenchError
from graphbench.ladders import (
    BatchSizeDistribution,
    average_waste,
    capture_sizes,
    eager_fraction,
    load_distribution,
    pad_to,
    padding_overhead,
    waste,
)
from graphbench.ladders.padding import token_waste

# Written out by hand (not computed by the library) for the independent checks below.
LADDER_64 = [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]
LADDER_64_INTERACTIVE = list(range(1, 33)) + [40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128]


def exact_uniform_waste(sizes: list[int], top: int) -> Fraction:
    """Average of (pad - n) / pad over n = 1..top, eager = 0, by linear scan and exact fractions."""
    total = Fraction(0)
    for n in range(1, top + 1):
        fitting = [s for s in sizes if s >= n]
        if fitting:
            p = min(fitting)
            total += Fraction(p - n, p)
    return total / top


# ---------------------------------------------------------------- pad_to / waste


def test_pad_to_and_waste_examples() -> None:
    assert pad_to(LADDER_64, 9) == 16
    assert waste(LADDER_64, 9) == pytest.approx(0.4375)
    assert round(100 * waste(LADDER_64, 9), 2) == 43.75
    assert pad_to(LADDER_64, 1) == 1 and waste(LADDER_64, 1) == 0.0
    assert pad_to(LADDER_64, 128) == 128
    assert pad_to(LADDER_64, 129) is None and waste(LADDER_64, 200) is None
    assert pad_to([], 1) is None
    assert pad_to(capture_sizes(64), 33) == 40  # a Ladder is accepted too


@pytest.mark.parametrize(
    "sizes, n",
    [([1, 2], 0), ([1, 2], -1), ([2, 1], 1), ([1, 1], 1), ([0, 1], 1), ([1, 2], 1.5)],
)
def test_pad_to_rejects_bad_input(sizes: list, n: object) -> None:
    with pytest.raises(GraphbenchError):
        pad_to(sizes, n)  # type: ignore[arg-type]


# ---------------------------------------------------------------- averages


def test_average_waste_for_64_seqs_is_7_29_percent() -> None:
    expected = exact_uniform_waste(LADDER_64, 128)
    got = average_waste(capture_sizes(64).sizes)
    assert got == pytest.approx(float(expected), abs=1e-12)
    assert round(100 * got, 2) == 7.29
    inter = average_waste(capture_sizes(64, performance_mode="interactivity").sizes)
    assert inter == pytest.approx(float(exact_uniform_waste(LADDER_64_INTERACTIVE, 128)), abs=1e-12)
    assert round(100 * inter, 2) == 3.55


def test_average_waste_for_256_seqs() -> None:
    sizes = [1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16))
    got = average_waste(capture_sizes(256))
    assert got == pytest.approx(float(exact_uniform_waste(sizes, 512)), abs=1e-12)
    assert round(100 * got, 2) == 3.28


def test_tiny_ladder_by_hand() -> None:
    # sizes [2, 4], n = 1..4: waste 1/2, 0, 1/4, 0 -> mean 3/16
    assert average_waste([2, 4]) == pytest.approx(3 / 16)
    assert eager_fraction([2, 4]) == 0.0
    # max_size 8: four more batches run eager (zero waste) -> (3/4) / 8
    assert average_waste([2, 4], max_size=8) == pytest.approx(3 / 32)
    assert eager_fraction([2, 4], max_size=8) == pytest.approx(0.5)
    # padded tokens: 2+2+4+4+5+6+7+8 = 38 over real 36
    assert padding_overhead([2, 4], max_size=8) == pytest.approx(38 / 36)


def test_averages_over_a_distribution() -> None:
    dist = {1: 1, 3: 1, 5: 2}  # probabilities 1/4, 1/4, 1/2
    assert average_waste([2, 4], dist) == pytest.approx(0.25 * 0.5 + 0.25 * 0.25)
    assert eager_fraction([2, 4], dist) == pytest.approx(0.5)
    # E[padded] = .25*2 + .25*4 + .5*5 = 4; E[real] = .25 + .75 + 2.5 = 3.5
    assert padding_overhead([2, 4], dist) == pytest.approx(4 / 3.5)
    assert average_waste([2, 4], BatchSizeDistribution(dist)) == average_waste([2, 4], dist)


def exact_token_waste(sizes: list[int], histogram: dict[int, int]) -> Fraction:
    """Padded-minus-real over padded tokens by linear scan; eager batches count padded = real."""
    padded = real = 0
    for n, count in histogram.items():
        fitting = [s for s in sizes if s >= n]
        padded += count * (min(fitting) if fitting else n)
        real += count * n
    return Fraction(padded - real, padded)


def test_token_waste_weighs_steps_by_their_tokens() -> None:
    # 3 steps of 9 pad to 16 (21 padding tokens), one of 16 pads nothing: 21 / 64, not the step mean 3/4 * 7/16
    assert token_waste([8, 16], {9: 3, 16: 1}) == 21 / 64
    assert average_waste([8, 16], {9: 3, 16: 1}) == pytest.approx(0.75 * 7 / 16)
    # two eager steps of 40 add 80 real tokens to the total and no padding: 21 / 144
    assert token_waste([8, 16], {9: 3, 16: 1, 40: 2}) == pytest.approx(21 / 144, abs=1e-15)
    # only proportions matter; every size on a rung pads nothing; all eager pads nothing
    assert token_waste([8, 16], {9: 30, 16: 10}) == token_waste([8, 16], {9: 3, 16: 1})
    assert token_waste(LADDER_64, {1: 5, 8: 2, 128: 1}) == 0.0
    assert token_waste([1, 2], {3: 4, 7: 1}) == 0.0
    assert token_waste([], {3: 4}) == 0.0
    # uniform over 1..top: [2, 4], n = 1..4: padded 2+2+4+4 = 12, real 10
    assert token_waste([2, 4]) == pytest.approx(2 / 12)
    hist = {1: 7, 3: 2, 5: 1, 9: 40, 33: 3, 100: 1, 129: 2, 300: 1}
    assert token_waste(LADDER_64, hist) == pytest.approx(float(exact_token_waste(LADDER_64, hist)), abs=1e-15)
    with pytest.raises(GraphbenchError, match="empty"):
        token_waste([8, 16], {9: 0})


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 600), min_size=1, max_size=30, unique=True),
       st.dictionaries(st.integers(1, 700), st.integers(1, 50), min_size=1, max_size=20))
def test_token_waste_is_one_minus_one_over_the_overhead(raw: list[int], histogram: dict[int, int]) -> None:
    sizes = sorted(raw)
    got = token_waste(sizes, histogram)
    assert got == pytest.approx(float(exact_token_waste(sizes, histogram)), abs=1e-12)
    assert got == pytest.approx(1 - 1 / padding_overhead(sizes, histogram), abs=1e-12)
    assert 0 <= got < 1


def test_average_errors() -> None:
    with pytest.raises(GraphbenchError, match="not both"):
        average_waste([1, 2], {1: 1}, max_size=4)
    with pytest.raises(GraphbenchError, match="empty ladder"):
        average_waste([])
    with pytest.raises(GraphbenchError):
        average_waste([1, 2], max_size=0)
    assert average_waste([], max_size=4) == 0.0
    assert eager_fraction([], max_size=4) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 600), min_size=1, max_size=30, unique=True), st.integers(1, 700))
def test_padding_properties(raw: list[int], n: int) -> None:
    sizes = sorted(raw)
    padded = pad_to(sizes, n)
    if n <= sizes[-1]:
        assert padded is not None and padded >= n and padded in sizes
        assert all(s < n for s in sizes if s < padded)  # the smallest rung that fits
        assert 0 <= waste(sizes, n) < 1
    else:
        assert padded is None and waste(sizes, n) is None
    avg = average_waste(sizes)
    assert 0 <= avg < 1
    assert padding_overhead(sizes) >= 1


# ---------------------------------------------------------------- distributions


def test_distribution_normalises_and_orders() -> None:
    dist = BatchSizeDistribution({8: 3, 1: 1, 4: 0})
    assert list(dist) == [1, 8]
    assert dist[1] == pytest.approx(0.25) and dist[8] == pytest.approx(0.75)
    assert dist.min_size == 1 and dist.max_size == 8 and len(dist) == 2
    assert dist.mean() == pytest.approx(6.25)
    uni = BatchSizeDistribution.uniform(4)
    assert dict(uni) == {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.25}
    assert dict(BatchSizeDistribution.from_samples([2, 2, 3, 2])) == {2: 0.75, 3: 0.25}


@pytest.mark.parametrize("weights", [{}, {1: 0}, {0: 1}, {-2: 1}, {1: -1}, {1: float("nan")}, {True: 1}])
def test_distribution_rejects_bad_weights(weights: dict) -> None:
    with pytest.raises(GraphbenchError):
        BatchSizeDistribution(weights)


def test_uniform_rejects_bad_range() -> None:
    with pytest.raises(GraphbenchError):
        BatchSizeDistribution.uniform(0)
    with pytest.raises(GraphbenchError):
        BatchSizeDistribution.uniform(3, min_size=5)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name, text",
    [
        ("hist.csv", "batch_size,count\n1,2\n8,6\n"),
        ("hist_spaces.csv", "# observed\nbatch_size, count\n\n1, 2\n8, 3\n8, 3\n"),
        ("hist_weight.csv", "num_tokens,weight\n8,0.75\n1,0.25\n"),
        ("sizes.csv", "batch_size\n1\n8\n8\n8\n"),
        ("sizes.txt", "1\n8\n\n8\n# comment\n8\n"),
        ("sizes.dat", "8\n1\n8\n8"),
        ("hist.json", json.dumps({"1": 1, "8": 3})),
        ("list.json", json.dumps([1, 8, 8, 8])),
        ("trace.jsonl", '{"batch_size": 1}\n{"batch_size": 8, "t": 0.1}\n\n{"batch_size": 8}\n{"batch_size": 8}\n'),
        ("trace.ndjson", '{"num_tokens": 1}\n{"num_tokens": 8}\n{"num_tokens": 8}\n{"num_tokens": 8}\n'),
        ("trace.log", '{"batch_size": 1}\n{"batch_size": 8}\n{"batch_size": 8}\n{"batch_size": 8}\n'),
        ("hist.jsonl", '{"batch_size": 8, "count": 6}\n{"batch_size": 1, "count": 2}\n'),
        ("weights.jsonl", '{"num_tokens": 8, "weight": 0.5}\n{"num_tokens": 1, "weight": 0.25}\n{"num_tokens": 8, "weight": 0.25}\n'),
        ("freq.ndjson", '{"batch_size": 1, "frequency": 1}\n{"batch_size": 8}\n{"batch_size": 8, "frequency": 2}\n'),
    ],
)
def test_distribution_file_formats(tmp_path: Path, name: str, text: str) -> None:
    dist = load_distribution(_write(tmp_path, name, text))
    assert dict(dist) == {1: 0.25, 8: 0.75}
    assert dist.source.endswith(name)
    assert BatchSizeDistribution.from_file(tmp_path / name) == dist


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("bad.csv", "batch_size,count\n1,2\nx,3\n", r"bad\.csv:3: batch_size must be a positive integer, got \'x\'"),
        ("neg.csv", "batch_size,count\n1,2\n4,-1\n", r"neg\.csv:3: count must be a non-negative number"),
        ("nan.csv", "batch_size,count\n1,abc\n", r"nan\.csv:2: count must be a number"),
        ("cols.csv", "batch_size,count\n1,2,3\n", r"cols\.csv:2: expected 2 columns"),
        ("zero.csv", "batch_size,count\n0,2\n", r"zero\.csv:2: .*positive integer, got 0"),
        ("header.csv", "size,n\n1,2\n", r"header\.csv:1: not a batch-size distribution, got 'size,n'; expected one of: a CSV with a header naming batch_size"),
        ("list.txt", "1\n2\n-3\n", r"list\.txt:3: batch size must be a positive integer"),
        ("list2.txt", "1\n\n2.5\n", r"list2\.txt:3"),
        ("empty.csv", "", "empty"),
        ("header_only.csv", "batch_size,count\n", "empty"),
        ("zeros.csv", "batch_size,count\n1,0\n2,0\n", "empty"),
        ("bad.json", '{"1": 2,', r"bad\.json:1: invalid JSON"),
        ("key.json", '{"one": 2}', r"key\.json: key 'one' must be a positive integer"),
        ("val.json", '{"1": "two"}', "non-negative number"),
        ("scalar.json", "3", "expected a JSON object"),
        ("empty.json", "{}", "empty"),
        ("trace.jsonl", '{"batch_size": 1}\n{"tokens": 2}\n', r"trace\.jsonl:2: record has neither"),
        ("trace2.jsonl", '{"batch_size": 1}\n\n{"batch_size": 0}\n', r"trace2\.jsonl:3: batch_size must be a positive integer, got 0"),
        ("trace3.jsonl", '{"batch_size": 1}\nnot json\n', r"trace3\.jsonl:2: invalid JSON"),
        ("trace4.jsonl", "[1]\n", r"trace4\.jsonl:1: expected a JSON object"),
        ("two.jsonl", '{"batch_size": 1, "count": 2, "weight": 1}\n', r"two\.jsonl:1: the record has count and weight"),
        ("negc.jsonl", '{"batch_size": 1, "count": -2}\n', r"negc\.jsonl:1: count of batch size 1 must be a non-negative"),
        ("strc.jsonl", '{"batch_size": 1, "count": "2"}\n', r"strc\.jsonl:1: count of batch size 1 must be a non-negative"),
    ],
)
def test_distribution_file_errors(tmp_path: Path, name: str, text: str, message: str) -> None:
    with pytest.raises(GraphbenchError, match=message):
        load_distribution(_write(tmp_path, name, text))


def test_missing_or_unreadable_distribution_file(tmp_path: Path) -> None:
    with pytest.raises(GraphbenchError, match="distribution file not found"):
        load_distribution(tmp_path / "nope.csv")
    with pytest.raises(GraphbenchError, match="not a file"):
        load_distribution(tmp_path)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(GraphbenchError, match="cannot read"):
        load_distribution(binary)
