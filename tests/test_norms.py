"""The norms outside the fused projections (runner/norms.py): the Triton kernels under the interpreter
against the torch ops of the eager model (bit for bit in float32; the interpreter's bfloat16 rounds
otherwise, tests/gpu/test_norms_gpu.py compares bfloat16 on the GPU); and which ops a fixed-size variant
gets back."""

from __future__ import annotations

import torch

from tests.interpreted import run_interpreted

CODE = """
import torch
from graphbench.runner.norms import add_rmsnorm_impl, add_rmsnorm_torch, embed_rmsnorm_impl, embed_rmsnorm_torch
g = torch.Generator().manual_seed(0)
for dtype, hidden in ((torch.float32, 96), (torch.bfloat16, 128)):  # 96: a row narrower than its block
    table = (torch.randn(50, hidden, generator=g) * 3).to(dtype)
    weight = torch.randn(hidden, generator=g).to(dtype)
    ids = torch.tensor([7, 0, 49, 7], dtype=torch.long)
    def same(got, want):
        if dtype == torch.float32:
            return all(torch.equal(a, b) for a, b in zip(got, want))
        return all(((a.float() - b.float()).norm() / b.float().norm()).item() < 1e-2 for a, b in zip(got, want))
    got, want = embed_rmsnorm_impl(ids, table, weight, 1e-5), embed_rmsnorm_torch(ids, table, weight, 1e-5)
    assert same(got, want) and torch.equal(got[1], table[ids]), dtype
    assert got[0].shape == (4, hidden) and got[0].dtype == dtype and torch.equal(got[0][0], got[0][3])
    x = torch.randn(3, hidden, generator=g).to(dtype)
    r = torch.randn(3, hidden, generator=g).to(dtype)
    got, want = add_rmsnorm_impl(x, r, weight, 1e-6), add_rmsnorm_torch(x, r, weight, 1e-6)
    assert same(got, want), dtype
    assert embed_rmsnorm_impl(ids[:0], table, weight, 1e-5)[0].shape == (0, hidden)
print("ok")
"""


def test_norm_kernels_equal_the_eager_model_in_the_interpreter():
    run_interpreted(CODE)


def test_fixed_size_variants_get_the_norms_as_torch_ops():
    import torch.fx as fx

    from graphbench.runner import norms
    from graphbench.runner.compile.pieces import linears_as_matmuls

    graph = fx.Graph()
    ids, table, w, x, r = (graph.placeholder(n) for n in ("ids", "table", "w", "x", "r"))
    first = graph.call_function(norms.embed_rmsnorm_op, (ids, table, w, 1e-5))
    last = graph.call_function(norms.add_rmsnorm_op, (x, r, w, 1e-5))
    graph.output((first, last))
    rewritten = linears_as_matmuls(fx.GraphModule(torch.nn.Module(), graph))
    targets = [n.target for n in rewritten.graph.nodes if n.op == "call_function"]
    assert targets == [norms.embed_rmsnorm_torch, norms.add_rmsnorm_torch]
