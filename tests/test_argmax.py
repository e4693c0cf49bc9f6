"""Greedy sampling's Triton argmax (runner/kernels/argmax.py) against torch.argmax, in the Triton interpreter."""

from __future__ import annotations

from tests.interpreted import run_interpreted_at_once

HEAD = """
import torch
from graphbench.runner.kernels.argmax import chunk_size, triton_argmax
from graphbench.runner.sampler import greedy
assert chunk_size(128256) == 2048 and chunk_size(151936) == 4096 and chunk_size(32000) == 1024
"""
ROWS = """
for vocab, dtype in VOCABS:
    g = torch.Generator().manual_seed(vocab)
    logits = torch.randn(6, vocab, generator=g).to(dtype)
    logits[1, 7] = logits[1, vocab - 3] = 50.0  # a tie across chunks: the first index wins
    logits[2, :] = 1.0  # all equal: index 0
    logits[3, vocab - 1] = 60.0  # the max in the last, partial chunk
    logits[4, :] = float("-inf")
    logits[4, 5] = -1e30  # everything else -inf
    logits[5, 1000:1003] = 70.0  # a tie inside one chunk
    got = triton_argmax(logits)
    assert got.dtype == torch.int64 and torch.equal(got, logits.argmax(-1)), (vocab, dtype, got)
    assert got[:6].tolist()[1:] == [7, 0, vocab - 1, 5, 1000]
    assert torch.equal(greedy(logits), got)
"""
TAIL = """
# rows of a wider buffer (row stride > vocab), and no rows at all
wide = torch.randn(3, 40000, generator=g)
assert torch.equal(triton_argmax(wide[:, :33000]), wide[:, :33000].argmax(-1))
assert triton_argmax(torch.randn(0, 9000)).shape == (0,)
# the stage-1 workspace is kept between calls: fewer rows, then more rows than it holds
from graphbench.runner.kernels import argmax as argmax_module
for rows in (5, 2, 11):
    x = torch.randn(rows, 9000, generator=g)
    assert torch.equal(triton_argmax(x), x.argmax(-1)), rows
assert argmax_module._workspaces[(x.device, 9)][0].shape == (11, 9)
# a caller's own workspace (a recording's): used, and the shared one left as it was
own = argmax_module.argmax_workspace(x.device, 16, 9000)
assert own[0].shape == own[1].shape == (16, 9)
own[1].fill_(-5)
before = argmax_module._workspaces[(x.device, 9)][0].data_ptr()
x = torch.randn(13, 9000, generator=g)
assert torch.equal(greedy(x, workspace=own), x.argmax(-1))
assert argmax_module._workspaces[(x.device, 9)][0].data_ptr() == before and bool((own[1][:13] != -5).all())
# into rows of a given buffer (the engine's sampled ids), through greedy: nothing outside them written
ids = torch.full((8,), -1, dtype=torch.int64)
got = greedy(wide[:, :33000], out=ids[2:5])
assert got.data_ptr() == ids[2:5].data_ptr() and torch.equal(ids[2:5], wide[:, :33000].argmax(-1))
assert ids[:2].tolist() == [-1, -1] and ids[5:].tolist() == [-1, -1, -1]
# a NaN is passed over (the id stays a token the next step can take as input) and flagged in `marked`
from graphbench.runner.kernels.util import NAN_MARK
x = torch.randn(4, 20000, generator=g)
want = x.argmax(-1)
x[1, 5] = float("nan")  # in one chunk of the row
x[2, :] = float("nan")  # the whole row
out, marked = torch.empty(4, dtype=torch.int64), torch.empty(4, dtype=torch.int64)
greedy(x, out=out, marked=marked)
clean = x.clone()
clean[1, 5] = float("-inf")
assert out[0] == want[0] and out[3] == want[3] and out[1] == clean[1].argmax() and 0 <= out[2] < 20000
assert marked.tolist() == [out[0].item(), out[1].item() + NAN_MARK, out[2].item() + NAN_MARK, out[3].item()]
"""
# two processes at once (the interpreter runs on one core), about as long as each other: 63 chunks (bf16,
# the engine's case); then 50 with a partial last one, 8 exact, and the rest (which goes on from the
# generator of the 8192 rows, as it did when all of it ran in one process)
CODES = [HEAD + "VOCABS = ((128256, torch.bfloat16),)" + ROWS + 'print("ok")\n',
         HEAD + "VOCABS = ((50257, torch.float32), (8192, torch.bfloat16))" + ROWS + TAIL + 'print("ok")\n']


def test_triton_argmax_equals_torch_argmax_in_the_interpreter():
    run_interpreted_at_once(CODES)


def test_greedy_on_the_cpu_is_torch_argmax_and_needs_no_triton():
    import torch

    from graphbench.runner.sampler import greedy

    logits = torch.randn(4, 128256)
    logits[0, 3] = logits[0, 100000] = 99.0
    assert torch.equal(greedy(logits), logits.argmax(-1)) and greedy(logits)[0].item() == 3
    ids = torch.full((6,), -1, dtype=torch.int64)
    greedy(logits, out=ids[1:5])
    assert torch.equal(ids[1:5], logits.argmax(-1)) and ids[[0, 5]].tolist() == [-1, -1]


def test_greedy_and_sampling_on_the_cpu_mark_a_row_holding_a_nan():
    import torch

    from graphbench.runner.kernels.util import NAN_MARK
    from graphbench.runner.sampler import greedy, mark_nan_rows, sample

    logits = torch.randn(3, 300)
    logits[1, 7] = float("nan")
    out, marked = torch.empty(3, dtype=torch.int64), torch.empty(3, dtype=torch.int64)
    greedy(logits, out=out, marked=marked)
    assert (marked - out).tolist() == [0, NAN_MARK, 0]
    ids = sample(logits, torch.tensor([0.7, 0.7, 0.0]), torch.ones(3), torch.Generator().manual_seed(0), False)
    assert ((ids >= 0) & (ids < 300)).all()  # multinomial never sees the NaN
    mark_nan_rows(logits, ids, marked)
    assert (marked - ids).tolist() == [0, NAN_MARK, 0]


def test_nan_logits_are_an_error_naming_the_requests_never_a_token():
    import pytest
    import torch

    from graphbench.config import load_engine_config
    from graphbench.errors import GraphbenchError
    from graphbench.runner.engine import Engine
    from graphbench.runner.request import SamplingParams

    engine = Engine(load_engine_config(overrides={"model.device": "cpu", "optimization_level": 0,
                                                  "scheduler.max_num_seqs": 4, "scheduler.max_num_batched_tokens": 64}))
    assert len(engine.generate([[1, 2, 3]], SamplingParams(max_tokens=3))[0]) == 3
    with torch.no_grad():
        engine.model.norm.weight.fill_(float("nan"))
    for params in (SamplingParams(max_tokens=3), SamplingParams(max_tokens=3, temperature=0.8)):
        with pytest.raises(GraphbenchError, match=r"logits hold a NaN for request\(s\) .*no token was sampled"):
            engine.generate([[1, 2, 3], [4, 5]], params)
    engine.close()

