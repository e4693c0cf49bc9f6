"""runner/residual_fold.py and kernels/fold_parts.py: the residual add + RMSNorm split across the projections
around it (in the Triton interpreter; tests/gpu/test_residual_fold_gpu.py compares the rounding bit for bit)."""

from __future__ import annotations

import operator

import torch
import torch.fx as fx

from tests.interpreted import run_interpreted_at_once

KERNELS = """
import torch, torch.nn.functional as F
from graphbench.runner.kernels import skinny_gemm as sk
from graphbench.runner.kernels.gemv import launch_gemv
from graphbench.runner.kernels.norm_gemv import launch_norm_gemv
g = torch.Generator().manual_seed(0)
bf = torch.bfloat16
def close(got, want):  # (the interpreter rounds float32 to bfloat16 toward zero: the GPU test compares bits)
    assert (got.float() - want.float()).abs().max() <= 0.02 * want.float().abs().max()
def ref_h(x, w, res):
    return (F.linear(x.float(), w.float()).to(bf).float() + res.float()).to(bf)
# producer: several column blocks (N 96 in blocks of 32: 3), split K 1 and 2, rows 2 / 17 / 64
for m in (2, 17, 64):
    for splits in (1, 2):
        n, k = 96, 256
        w = torch.randn(n, k, generator=g).to(bf); x = torch.randn(m, k, generator=g).to(bf); res = torch.randn(m, n, generator=g).to(bf)
        h, rstd = sk.skinny_gemm_residual(x, w, res, 1e-6, (32, 64, splits, 4, 1))
        want = ref_h(x, w, res)
        assert (h.float() - want.float()).abs().max() <= 0.02 * want.float().abs().max(), (m, splits)
        want_rstd = torch.rsqrt(h.float().pow(2).mean(-1) + 1e-6)
        assert torch.allclose(rstd, want_rstd, rtol=1e-5), (rstd, want_rstd)
        # twice: the count was reset
        h2, rstd2 = sk.skinny_gemm_residual(x, w, res, 1e-6, (32, 64, splits, 4, 1))
        assert torch.equal(h, h2) and torch.equal(rstd, rstd2)
        # consumer: normalised tiles equal the add-norm kernel's rounding given the same rstd, bit for bit
        nw = torch.randn(n, generator=g).to(bf)
        wc = torch.randn(40, n, generator=g).to(bf)
        normed = ((h.float() * rstd[:, None]).to(bf).float() * nw.float()).to(bf)
        got = sk.skinny_gemm(h, wc, None, (16, 32, 1, 4, 1), norm=(rstd, nw))
        close(got, sk.skinny_gemm(normed, wc, None, (16, 32, 1, 4, 1)))
        got = sk.skinny_gate_up(h, wc, (16, 32, 4, 1), norm=(rstd, nw))
        close(got, sk.skinny_gate_up(normed, wc, (16, 32, 4, 1)))
# one row: GEMV + residual, then the add-norm GEMV on h alone equals the add-norm GEMV on (x, residual)
for k, block_k in ((512, 512), (576, 1024)):
    n = 96
    w = torch.randn(n, k, generator=g).to(bf); x = torch.randn(1, k, generator=g).to(bf); res = torch.randn(1, n, generator=g).to(bf)
    y = torch.empty(1, n, dtype=bf); launch_gemv(x, w, None, y, 4, block_k, 2, interpret=True)
    h = torch.empty(1, n, dtype=bf); launch_gemv(x, w, None, h, 4, block_k, 2, interpret=True, residual=res)
    close(h, (y.float() + res.float()).to(bf))
    wc, nw = torch.randn(64, n, generator=g).to(bf), torch.randn(n, generator=g).to(bf)
    for gated in (False, True):
        out_n = 32 if gated else 64
        a, ah, b = torch.empty(1, out_n, dtype=bf), torch.empty(1, n, dtype=bf), torch.empty(1, out_n, dtype=bf)
        launch_norm_gemv(y, res, nw, 1e-6, wc, None, a, ah, 4, 128, 2, gated=gated, interpret=True)
        launch_norm_gemv(h, None, nw, 1e-6, wc, None, b, None, 4, 128, 2, gated=gated, interpret=True)
        assert torch.equal(ah, h) and torch.equal(a, b), gated
print("ok")
"""

MODEL = """
import torch
from dataclasses import replace
from graphbench.config import load_arch
from graphbench.runner import kernel_choice as kc, residual_fold as rf
from graphbench.runner.kernel_choice import KernelChoice
from graphbench.runner.model import Attention, CausalLM, _norm

arch = replace(load_arch("tiny-llama"), num_hidden_layers=3)
torch.manual_seed(0)
folded = CausalLM(arch, 64).to(torch.bfloat16)
for module in folded.modules():
    if hasattr(module, "eps"):
        module.weight.data = (1 + 0.3 * torch.randn(module.weight.shape)).to(torch.bfloat16)
reference = CausalLM(arch, 64, kernels="torch").to(torch.bfloat16)
reference.load_state_dict(folded.state_dict())
# the attention op reads the engine's KV cache: a fixed function of q and k stands in for it
Attention.attend = lambda self, positions, qkv: (qkv[:, :self.q_size] * 0.5 + qkv[:, self.q_size:self.q_size + self.kv_size].repeat(1, 2)).contiguous()

def unfolded(model, ids, positions):
    # the layers as tensor parallelism and LoRA run them: add-norm launches between the projections
    layers = list(model.layers)
    h, residual = model.ops.embed_rmsnorm(ids, model.embed_tokens.weight, *_norm(layers[0].input_layernorm))
    x, residual = layers[0].forward_normed(positions, h, residual)
    for layer in layers[1:]:
        x, residual = layer(positions, x, residual)
    return model.norm(x, residual)[0]

def plans(rows):
    x = torch.empty(rows, 64, dtype=torch.bfloat16)
    layer = folded.layers[0]
    o, gu, down, qkv = (layer.self_attn.o_proj.weight, layer.mlp.gate_up_proj.weight, layer.mlp.down_proj.weight,
                        layer.self_attn.qkv_proj.weight)
    return rf.fold_plan(x, o, gu, True), rf.fold_plan(x, down, qkv, False), rf.fold_plan(x, down, None, False)

def check(rows, want_plans):
    assert plans(rows) == want_plans, (rows, plans(rows))
    ids = torch.randint(0, 512, (rows,))
    positions = torch.arange(rows)
    got = folded(ids, positions)
    want = reference(ids, positions).float()
    err = ((got.float() - want).norm() / want.norm()).item()
    assert got.shape == (rows, 64) and err < 2e-2, (rows, err)
    return got, ids, positions

# nothing measured: the interpreter's rule runs cuBLAS's stand-in (F.linear) for K < 128, so the add-norm stays
# apart, launch for launch the unfolded layer's: equal bit for bit
for rows in (1, 5):
    got, ids, positions = check(rows, ("apart",) * 3)
    assert torch.equal(got, unfolded(folded, ids, positions)), rows
# the skinny GEMMs chosen at 2..64 rows: the residual in o's and down's epilogue, the norm in the next tiles
skinny = (32, 32, 1, 4, 1)
kc.install([KernelChoice("linear", n, k, cls, "skinny", skinny) for cls in (16, 32, 64)
            for n, k in ((128, 64), (64, 64), (64, 128))]
           + [KernelChoice("gate_up", 256, 64, 16, "gated_skinny", (16, 32, 4, 1)),
              KernelChoice("gate_up", 256, 64, 32, "skinny", skinny)])
for rows in (2, 16, 17, 32):
    check(rows, ("rows", "rows", "apart"))
check(65, ("apart",) * 3)  # more than 64 rows: cuBLAS
# gate/up on cuBLAS at 64 rows: o's add-norm stays apart, down's folds into qkv
kc.install([KernelChoice("gate_up", 256, 64, 64, "torch")])
check(64, ("apart", "rows", "apart"))
# one row: the GEMV adds the residual, the add-norm GEMV chosen at start-up reads h
gemv = (4, 64, 2)
kc.install([KernelChoice("linear", 64, 64, 1, "gemv", gemv), KernelChoice("linear", 64, 128, 1, "gemv", (4, 128, 2)),
            KernelChoice("norm_linear", 128, 64, 1, "norm_gemv", gemv),
            KernelChoice("norm_gate_up", 256, 64, 1, "norm_gated_gemv", gemv)])
check(1, ("one_row", "one_row", "apart"))
print("ok")
"""


def test_fold_kernels_and_the_folded_model_in_the_interpreter():
    run_interpreted_at_once([KERNELS, MODEL])


def test_on_the_cpu_every_plan_is_apart_and_the_model_is_the_unfolded_one():
    """Without Triton's device the producer runs F.linear and the torch add-norm, and the consumer F.linear on
    the normed rows: the graphbench-ops model equals the torch-ops model bit for bit."""
    from dataclasses import replace

    from graphbench.config import load_arch
    from graphbench.runner import residual_fold
    from graphbench.runner.model import Attention, CausalLM

    arch = replace(load_arch("tiny-llama"), num_hidden_layers=3)
    torch.manual_seed(0)
    ours, reference = CausalLM(arch, 64), CausalLM(arch, 64, kernels="torch")
    reference.load_state_dict(ours.state_dict())
    x = torch.empty(4, 64)
    layer = ours.layers[0]
    assert residual_fold.fold_plan(x, layer.self_attn.o_proj.weight, layer.mlp.gate_up_proj.weight, True) == "apart"
    original = Attention.attend
    try:  # the attention op reads the engine's KV cache: a fixed function of q stands in for it
        Attention.attend = lambda self, positions, qkv: qkv[:, : self.q_size] * 0.5
        ids, positions = torch.randint(0, 512, (4,)), torch.arange(4)
        assert torch.equal(ours(ids, positions), reference(ids, positions))
    finally:
        Attention.attend = original


def test_fixed_size_variants_get_the_fold_ops_as_torch_ops():
    """compile/pieces.linears_as_matmuls turns the fold's three ops into their torch forms, which compute what
    the ops compute where they keep the add-norm apart."""
    from graphbench.runner import residual_fold as rf
    from graphbench.runner.compile.pieces import linears_as_matmuls

    graph = fx.Graph()
    x, w, res, nw, w_gu, nw2, w2 = (graph.placeholder(n) for n in ("x", "w", "res", "nw", "w_gu", "nw2", "w2"))
    first = graph.call_function(rf.linear_residual_op, (x, w, res, nw, 1e-6, w_gu, True))
    h, rstd, normed = (graph.call_function(operator.getitem, (first, i)) for i in range(3))
    hidden = graph.call_function(rf.norm_gate_up_op, (h, rstd, normed, nw, 1e-6, w_gu, w))
    second = graph.call_function(rf.linear_residual_op, (hidden, w2, h, nw2, 1e-6, None, False))
    graph.output(graph.call_function(operator.getitem, (second, 2)))
    piece = fx.GraphModule(torch.nn.Module(), graph)
    rewritten = linears_as_matmuls(piece)
    targets = [n.target for n in rewritten.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    assert targets == [rf.linear_residual_torch, rf.norm_gate_up_torch, rf.linear_residual_torch]
    # x[3, 8] -> w[4, 8] + res[3, 4] -> norm nw[4] -> gate/up w_gu[8, 4] -> w2[4, 4] + h -> norm nw2
    args = (torch.randn(3, 8), torch.randn(4, 8), torch.randn(3, 4), torch.randn(4), torch.randn(8, 4),
            torch.randn(4), torch.randn(4, 4))
    assert torch.equal(rewritten(*args), piece(*args))
