"""runner/linear.py: the one-row Triton GEMV (in the Triton interpreter) and where it is used."""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F

from tests.interpreted import run_interpreted

CODE = """
import torch, torch.nn.functional as F
from graphbench.runner.kernels.gemv import launch_gemv
from graphbench.runner.kernel_choice import gemv_rule
from graphbench.runner.linear import chosen_kernel, linear_impl
def gemv_applies(x, w):
    choice = chosen_kernel("linear", x, w)
    return choice is not None and choice.kernel == "gemv"
g = torch.Generator().manual_seed(0)
# through linear_impl (the small-matrix blocks); N not a multiple of BLOCK_N; with and without bias
for (n, k), dtype in (((48, 512), torch.float32), ((37, 1024), torch.bfloat16), ((9, 896), torch.float32)):
    w = torch.randn(n, k, generator=g).to(dtype)
    b = torch.randn(n, generator=g).to(dtype)
    x = torch.randn(1, k, generator=g).to(dtype)
    assert gemv_applies(x, w), (n, k)
    for bias in (None, b):
        got = linear_impl(x, w, bias)
        ref = F.linear(x.float(), w.float(), None if bias is None else bias.float())
        err = ((got.float() - ref).norm() / ref.norm()).item()
        assert got.shape == (1, n) and got.dtype == dtype and err < (1e-5 if dtype == torch.float32 else 1e-2), (n, k, err)
# the large-matrix blocks, on a small matrix (K = BLOCK_K = 4096: one tile)
w, x = torch.randn(5, 4096, generator=g), torch.randn(1, 4096, generator=g)
out = torch.empty(1, 5)
launch_gemv(x, w, None, out, *gemv_rule(4096, 4096), interpret=True)
assert gemv_rule(4096, 4096) == (2, 4096, 4) and gemv_rule(48, 512) == (4, 512, 8)
assert torch.allclose(out, x @ w.T, rtol=1e-5, atol=1e-4)
# the whole-row tile where K is no power of two (576 in one tile of 1024, masked past K): plain and gated
w, x = torch.randn(18, 576, generator=g), torch.randn(1, 576, generator=g)
out, gated, two = torch.empty(1, 18), torch.empty(1, 9), torch.empty(1, 9)
launch_gemv(x, w, None, out, 4, 1024, 2, interpret=True)
assert torch.allclose(out, x @ w.T, rtol=1e-5, atol=1e-4)
from graphbench.runner.kernels.gemv import launch_gated_gemv, launch_silu_mul
launch_gated_gemv(x, w, gated, 4, 1024, 2, interpret=True)
launch_silu_mul(out, two)
assert torch.allclose(gated, two, rtol=1e-5, atol=1e-5)
# the whole row in power-of-two pieces: 896 = 512 + 256 + 128, 960 = 512 + 256 + 256 (the last masked past
# K), 576 = 512 + 64; plain (with bias) and gated, against torch in float32
from graphbench.runner.kernels.row_pieces import row_pieces
assert row_pieces(4864) == (4096, 512, 256) and row_pieces(960) == (512, 256, 256) and row_pieces(576) == (512, 64, 0)
for k in (896, 960, 576):
    w, x, b = torch.randn(14, k, generator=g), torch.randn(1, k, generator=g), torch.randn(14, generator=g)
    out, gated = torch.empty(1, 14), torch.empty(1, 7)
    launch_gemv(x, w, b, out, 2, 1024, 2, interpret=True)
    assert torch.allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-4), k
    launch_gated_gemv(x, w, gated, 2, 1024, 2, interpret=True)
    h = x @ w.T
    assert torch.allclose(gated, F.silu(h[:, :7]) * h[:, 7:], rtol=1e-5, atol=1e-4), k
# tiles loaded ahead (stages 2, 3) sum the same tiles in the same order: equal bit for bit to one stage, for
# K loops of 1, 2 and 5 tiles (stages past the loop's tiles too), plain and gated
from graphbench.runner.kernels.gemv import MAX_STAGES
for k in (128, 256, 640):
    w, x = torch.randn(22, k, generator=g).to(torch.bfloat16), torch.randn(1, k, generator=g).to(torch.bfloat16)
    outs, gated = [], []
    for stages in range(1, MAX_STAGES + 1):
        outs.append(torch.empty(1, 22, dtype=torch.bfloat16))
        launch_gemv(x, w, None, outs[-1], 4, 128, 2, stages, interpret=True)
        gated.append(torch.empty(1, 11, dtype=torch.bfloat16))
        launch_gated_gemv(x, w, gated[-1], 4, 128, 2, stages, interpret=True)
    assert all(torch.equal(o, outs[0]) for o in outs) and all(torch.equal(o, gated[0]) for o in gated), k
    assert torch.allclose(outs[0].float(), x.float() @ w.float().T, rtol=2e-2, atol=2e-2), k
# the MLP's add-norm + gate/up projection + activation: the GEMV (one row) or the matmul (3 rows), then
# one silu-mul launch; against torch in float32; intermediate 24
from graphbench.runner.linear import add_rmsnorm_gate_up_impl, add_rmsnorm_gate_up_matmul
for rows in (1, 3):
    w, nw = torch.randn(48, 512, generator=g), torch.randn(512, generator=g)
    x, res = torch.randn(rows, 512, generator=g), torch.randn(rows, 512, generator=g)
    got, h = add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w)
    ref, ref_h = add_rmsnorm_gate_up_matmul(x, res, nw, 1e-6, w)
    assert got.shape == (rows, 24) and torch.equal(h, ref_h), rows
    assert torch.allclose(got, ref, rtol=1e-4, atol=1e-4), (rows, (got - ref).abs().max())
# the one-row gate/up GEMV with the activation in its epilogue: equal to the GEMV +
# the silu-mul launch; in bf16, I = 40 in blocks of 16 (the last block masked), one and two K tiles
from graphbench.runner import linear
for k, block_k in ((256, 256), (512, 256)):
    w = torch.randn(80, k, generator=g).to(torch.bfloat16)
    x = torch.randn(1, k, generator=g).to(torch.bfloat16)
    gate_up = torch.empty(1, 80, dtype=torch.bfloat16)
    launch_gemv(x, w, None, gate_up, 2, block_k, 2, interpret=True)
    two = torch.empty(1, 40, dtype=torch.bfloat16)
    launch_silu_mul(gate_up, two)
    one = torch.empty(1, 40, dtype=torch.bfloat16)
    launch_gated_gemv(x, w, one, 16, block_k, 2, interpret=True)
    assert torch.equal(one, two), k
w, nw = torch.randn(80, 512, generator=g).to(torch.bfloat16), torch.randn(512, generator=g).to(torch.bfloat16)
x, res = torch.randn(1, 512, generator=g).to(torch.bfloat16), torch.randn(1, 512, generator=g).to(torch.bfloat16)
normed, want_h = linear.add_rmsnorm_rows(x, res, nw, 1e-6)
want = torch.empty(1, 40, dtype=torch.bfloat16)
launch_silu_mul(linear.gemv(normed, w, None, gemv_rule(80, 512)), want)  # the two launches the gated GEMV replaces
calls = []
real = linear.gated_gemv
linear.gated_gemv = lambda *a: calls.append(a[1].shape) or real(*a)
got, h = linear.add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w)  # one row: the gated GEMV
assert calls == [w.shape] and torch.equal(h, want_h)
assert ((got.float() - want.float()).abs().max() <= 1e-2 * want.float().abs().max()), (got - want).abs().max()
# residual add + RMSNorm + projection: one add-norm launch, then the GEMV (one row; one and several K
# chunks) or the matmul (3 rows); against torch in float32
from graphbench.runner.linear import add_rmsnorm_linear_impl, add_rmsnorm_matmul
for rows, n, k in ((1, 24, 512), (1, 5, 4096), (3, 24, 512)):
    w, nw, b = torch.randn(n, k, generator=g), torch.randn(k, generator=g), torch.randn(n, generator=g)
    x, res = torch.randn(rows, k, generator=g), torch.randn(rows, k, generator=g)
    got, h = add_rmsnorm_linear_impl(x, res, nw, 1e-6, w, b)
    ref, ref_h = add_rmsnorm_matmul(x, res, nw, 1e-6, w, b)
    assert torch.equal(h, ref_h) and torch.allclose(got, ref, rtol=1e-4, atol=1e-4), (rows, n, k)
# not one row, K too small or not a multiple of the K block: F.linear
w = torch.randn(64, 512)
assert not gemv_applies(torch.randn(2, 512), w)
assert not gemv_applies(torch.randn(1, 64), torch.randn(64, 64))
assert not gemv_applies(torch.randn(1, 960), torch.randn(64, 960))  # 960 = 15 x 64
assert gemv_rule(64, 896) == (4, 128, 8) and gemv_rule(3584, 18944) == (2, 512, 2)
print("ok")
"""


def test_gemv_equals_linear_in_the_interpreter():
    run_interpreted(CODE)


def test_on_the_cpu_every_linear_is_torch_linear():
    from graphbench.runner.linear import chosen_kernel, linear, linear_op
    from graphbench.runner.model import Linear

    layer = Linear(16, 8, True, linear)
    x = torch.randn(1, 16)
    assert chosen_kernel("linear", x, layer.weight) is None
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    assert torch.equal(linear_op(x, layer.weight, None), F.linear(x, layer.weight))
    assert list(layer.state_dict()) == ["weight", "bias"]  # checkpoints load as into nn.Linear


def test_fixed_size_variants_see_matmuls_again():
    import operator

    from graphbench.runner.compile.pieces import linears_as_matmuls
    from graphbench.runner.linear import (
        add_rmsnorm_gate_up_matmul,
        add_rmsnorm_gate_up_op,
        add_rmsnorm_linear_op,
        add_rmsnorm_matmul,
        linear_op,
    )

    graph = fx.Graph()
    x, w, res, nw, w_gu, nw2, w2 = (graph.placeholder(n) for n in ("x", "w", "res", "nw", "w_gu", "nw2", "w2"))
    y = graph.call_function(linear_op, (x, w, None))
    mlp = graph.call_function(add_rmsnorm_gate_up_op, (y, res, nw, 1e-6, w_gu))
    hidden, h = (graph.call_function(operator.getitem, (mlp, i)) for i in (0, 1))
    both = graph.call_function(add_rmsnorm_linear_op, (hidden, h, nw2, 1e-6, w2, None))
    graph.output(graph.call_function(torch.add, (graph.call_function(operator.getitem, (both, 1)),
                                                 graph.call_function(operator.getitem, (both, 0)))))
    piece = fx.GraphModule(torch.nn.Module(), graph)
    rewritten = linears_as_matmuls(piece)
    targets = [n.target for n in rewritten.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    assert targets[:3] == [F.linear, add_rmsnorm_gate_up_matmul, add_rmsnorm_matmul]
    assert [n.target for n in piece.graph.nodes if n.op == "call_function"][0] is linear_op  # a copy
    # x[3, 8] -> w[4, 8] -> add-norm with res[3, 4], nw[4] -> gate/up w_gu[8, 4] -> silu-mul [3, 4]
    # -> add-norm with the residual [3, 4], nw2[4] -> w2[4, 4]
    args = (torch.randn(3, 8), torch.randn(4, 8), torch.randn(3, 4), torch.randn(4), torch.randn(8, 4),
            torch.randn(4), torch.randn(4, 4))
    assert torch.equal(rewritten(*args), piece(*args))


def test_kernels_torch_builds_a_model_of_torch_ops_only(monkeypatch):
    """config.model.kernels = torch: every projection and norm of the model is a torch op, which runs
    none of graphbench's kernels even where they would apply (the Triton interpreter on the CPU)."""
    from graphbench.config import load_arch
    from graphbench.runner import linear, norms
    from graphbench.runner.model import LAYER_OPS, CausalLM

    model = CausalLM(load_arch("tiny-llama"), 64, kernels="torch")
    layer = model.layers[1]
    assert model.ops is LAYER_OPS["torch"] and layer.ops is LAYER_OPS["torch"]
    assert {m.op for m in model.modules() if isinstance(m, torch.nn.Linear)} == {F.linear}
    assert layer.input_layernorm.add_rmsnorm is norms.add_rmsnorm_torch
    assert CausalLM(load_arch("tiny-llama"), 64).ops is LAYER_OPS["graphbench"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # graphbench's own ops would send these to its kernels
    for module in (linear, norms):
        monkeypatch.setattr(module, "_kernels", lambda: pytest.fail("a graphbench kernel ran"))
    ops = LAYER_OPS["torch"]
    x, res, nw, w = torch.randn(1, 512), torch.randn(1, 512), torch.randn(512), torch.randn(16, 512)
    assert torch.equal(ops.linear(x, w), F.linear(x, w))
    got, h = ops.add_rmsnorm_gate_up(x, res, nw, 1e-6, w)
    assert got.shape == (1, 8) and torch.equal(h, x + res)
    ops.add_rmsnorm_linear(x, res, nw, 1e-6, w, None)
    ops.add_rmsnorm(x, res, nw, 1e-6)
    ops.embed_rmsnorm(torch.tensor([0, 3]), w, nw, 1e-6)


def test_pdl_is_only_used_on_cuda_and_adds_no_launch_option_otherwise(monkeypatch):
    pytest.importorskip("triton")
    from graphbench.runner.kernels import pdl

    monkeypatch.delenv("GRAPHBENCH_PDL", raising=False)  # on, its default
    assert not pdl.use_pdl(torch.zeros(2))  # a CPU tensor (and the interpreter) never launches with PDL
    # only the capture phase launches with PDL; the flag is restored even when the phase fails
    assert pdl._graph_phase is False
    with pytest.raises(RuntimeError), pdl.graph_launches():
        assert pdl._graph_phase is True
        with pdl.graph_launches():
            pass
        assert pdl._graph_phase is True  # nested: still inside the outer phase
        assert not pdl.use_pdl(torch.zeros(2))
        raise RuntimeError("capture failed")
    assert pdl._graph_phase is False
    assert pdl.pdl_launch_options(True) == {"launch_pdl": True}
    assert pdl.pdl_launch_options(False) == {}  # the interpreter takes no launch options at all


def test_launch_arithmetic_equals_tritons():
    """runner/kernels/util's next_power_of_2 / cdiv (plain Python, ~0.2 us) give what triton's (~5 us a call) give."""
    triton = pytest.importorskip("triton")
    from graphbench.runner.kernels.util import cdiv, next_power_of_2

    assert all(next_power_of_2(n) == triton.next_power_of_2(n) for n in range(1, 70000))
    assert all(cdiv(a, b) == triton.cdiv(a, b) for a in range(0, 700) for b in range(1, 70))


SKINNY_CODE = """
import torch, torch.nn.functional as F
from graphbench.runner.kernels.skinny_gemm import skinny_applies, skinny_gemm
from graphbench.runner.kernel_choice import blocks_fit, rule_choice, skinny_rule, split_count
g = torch.Generator().manual_seed(1)
# rows 2, 17 and 64; N not a multiple of BLOCK_N; K split 1, 2 and 8 ways; with and without bias; against
# float64, and the split result equal to itself when run again (the partials are summed in split order)
for rows, n, k, sms in ((2, 200, 256, 132), (17, 64, 1024, 8), (64, 70, 1024, 132), (5, 130, 128, 132)):
    w = torch.randn(n, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, generator=g).to(torch.bfloat16)
    x = torch.randn(rows, k, generator=g).to(torch.bfloat16)
    assert skinny_applies(x, w)
    for bias in (None, b):
        got = skinny_gemm(x, w, bias, skinny_rule(n, k, sms))
        ref = F.linear(x.double(), w.double(), None if bias is None else bias.double())
        err = ((got.double() - ref).norm() / ref.norm()).item()
        assert got.shape == (rows, n) and got.dtype == torch.bfloat16 and err < 1e-2, (rows, n, k, err)
        assert torch.equal(got, skinny_gemm(x, w, bias, skinny_rule(n, k, sms))), (rows, n, k)
assert [split_count(n, k, 132) for n, k in ((2048, 2048), (3072, 2048), (16384, 2048), (2048, 8192))] == [8, 4, 1, 8]
assert split_count(200, 256, 132) == 2 and split_count(64, 1024, 8) == 8 and split_count(130, 128, 132) == 1
assert not skinny_applies(torch.randn(1, 256).bfloat16(), w[:, :256])  # one row: the GEMV's
assert not skinny_applies(torch.randn(65, 128).bfloat16(), w[:, :128])  # more rows than a decode batch here
assert not blocks_fit("skinny", skinny_rule(8, 192, 132), 8, 192, 16)  # K not x 128: the rule's tile does not fit
assert not skinny_applies(torch.randn(4, 128), torch.randn(8, 128))  # float32
# the gate/up projection with silu(gate) * up in its epilogue: equal to the projection + the silu-mul launch
# (both round the products to bf16 first); I not a multiple of BLOCK_N; 2, 17 and 64 rows
from graphbench.runner.kernels.gemv import launch_silu_mul
from graphbench.runner.kernels.skinny_gemm import skinny_gate_up
for rows, inter, k, config in ((2, 40, 256, (16, 128, 4, 1)), (17, 96, 512, (32, 64, 4, 1)), (64, 32, 128, (32, 128, 4, 4))):
    w = torch.randn(2 * inter, k, generator=g).to(torch.bfloat16)
    x = torch.randn(rows, k, generator=g).to(torch.bfloat16)
    gate_up = skinny_gemm(x, w, None, (config[0], config[1], 1, 4, 1))
    expected = torch.empty(rows, inter, dtype=torch.bfloat16)
    launch_silu_mul(gate_up, expected)
    got = skinny_gate_up(x, w, config)
    assert got.shape == (rows, inter) and torch.equal(got, expected), (rows, inter, k)
    ref = F.silu(F.linear(x.double(), w[:inter].double())) * F.linear(x.double(), w[inter:].double())
    assert ((got.double() - ref).norm() / ref.norm()).item() < 1e-2
assert rule_choice("gate_up", 256, 128, 32, False, 132).blocks == (32, 128, 4, 4)  # the rule's 64 columns, halved
# the engine's MLP op with nothing measured (the rule): at 17 rows the gated kernel runs, with the same result
# as two launches (the skinny GEMM, then silu-mul); at 16 rows those two launches
from graphbench.runner import linear
from graphbench.runner.kernels import skinny_gemm as skinny_module
w, nw = torch.randn(96, 256, generator=g).to(torch.bfloat16), torch.randn(256, generator=g).to(torch.bfloat16)
gated_calls = []
skinny_module.skinny_gate_up = lambda *a: gated_calls.append(a[0].shape) or skinny_gate_up(*a)
for rows, gated in ((17, True), (16, False)):
    x, res = torch.randn(rows, 256, generator=g).to(torch.bfloat16), torch.randn(rows, 256, generator=g).to(torch.bfloat16)
    gated_calls.clear()
    got, h = linear.add_rmsnorm_gate_up_impl(x, res, nw, 1e-6, w)
    normed, want_h = linear.add_rmsnorm_rows(x, res, nw, 1e-6)
    want = torch.empty(rows, 48, dtype=torch.bfloat16)
    launch_silu_mul(linear.linear_impl(normed, w), want)
    assert gated_calls == ([(rows, 256)] if gated else []) and torch.equal(h, want_h) and torch.equal(got, want), rows
print("ok")
"""


def test_skinny_gemm_equals_linear_in_the_interpreter():
    run_interpreted(SKINNY_CODE)
