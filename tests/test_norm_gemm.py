"""kernels/norm_gemm.py in the Triton interpreter: the skinny GEMM with the residual add + RMSNorm in front,
against the add-norm kernel + the skinny GEMM (and the gated GEMM), and against float64."""

from tests.interpreted import run_interpreted

NORM_GEMM_CODE = """
import torch, torch.nn.functional as F
from graphbench.runner import linear
from graphbench.runner.kernels.add_rmsnorm import launch_add_rmsnorm
from graphbench.runner.kernels.norm_gemm import norm_gemm, norm_gemm_applies
from graphbench.runner.kernels.skinny_gemm import skinny_gate_up, skinny_gemm

g = torch.Generator().manual_seed(3)
eps = 1e-5


def bf16(*shape, scale=1.0):
    return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16)


def two_launches(x, res, nw):
    normed, h = torch.empty_like(x), torch.empty_like(x)
    launch_add_rmsnorm(x, res, nw, eps, normed, h)
    return normed, h


def ref_normed(x, res, nw):  # float64: rmsnorm(bf16(x + res)) * nw
    h = (x.float() + res.float()).to(torch.bfloat16).double()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * nw.double()


def rel_err(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


# (rows, N, K, config): 2, 17 and 64 rows; N not a multiple of BLOCK_N; the residual larger than x (as a
# residual stream is); K in 1, 2 and 8 tiles
for rows, n, k in ((2, 200, 256), (17, 300, 512), (64, 70, 128)):
    x, res, nw, w, b = bf16(rows, k), bf16(rows, k, scale=8.0), bf16(k), bf16(n, k), bf16(n)
    assert norm_gemm_applies(x, w, 1)  # one SM: the rule's blocks take one split of K
    normed, want_h = two_launches(x, res, nw)
    for bias in (None, b):
        got, h = norm_gemm(x, res, nw, eps, w, bias, 1)
        assert torch.equal(h, want_h), (rows, n, k)  # the next residual, bit for bit
        want = skinny_gemm(normed, w, bias, 1)
        ref = F.linear(ref_normed(x, res, nw), w.double(), None if bias is None else bias.double())
        assert got.shape == (rows, n) and got.dtype == torch.bfloat16
        # rounded once (float32) where the two launches round the normed row twice to bf16: the same to bf16's precision
        assert rel_err(got, ref) < 1e-2 and rel_err(want, ref) < 1e-2, (rows, n, k, rel_err(got, ref))
        assert rel_err(got, want.double()) < 1e-2
        assert torch.equal(got, norm_gemm(x, res, nw, eps, w, bias, 1)[0])  # deterministic
    # gated: silu(gate) * up of the normed rows
    inter = n // 2
    got, h = norm_gemm(x, res, nw, eps, w[: 2 * inter], None, 132, gated=True)
    assert torch.equal(h, want_h) and got.shape == (rows, inter)
    want = skinny_gate_up(normed, w[: 2 * inter])
    xn = ref_normed(x, res, nw)
    ref = F.silu(F.linear(xn, w[:inter].double())) * F.linear(xn, w[inter: 2 * inter].double())
    assert rel_err(got, ref) < 2e-2 and rel_err(got, want.double()) < 2e-2, (rows, inter, rel_err(got, ref))

# the stage count fits the SM's shared memory: llama-3.1-8b's qkv blocks at 64 rows take 3 of the skinny GEMM's 5
from graphbench.runner.kernels.norm_gemm import norm_gemm_stages
assert norm_gemm_stages(64, 64, 128, 5, False) == 3 and norm_gemm_stages(16, 64, 128, 5, False) == 5
assert norm_gemm_stages(64, 32, 64, 3, True) == 3 and norm_gemm_stages(256, 256, 256, 4, True) == 2

# float16: not taken (the row times the norm weight could overflow before the 1/rms scale)
assert not norm_gemm_applies(bf16(4, 128).half(), bf16(70, 128).half(), 1)

# where the skinny GEMM's blocks split K, the norm does not run inside it
w = bf16(256, 2048)
assert not norm_gemm_applies(bf16(4, 2048), w, 132)  # the rule splits K: 4 column blocks on 132 SMs

# the engine's ops take it with GRAPHBENCH_NORM_IN_GEMM=1 (qkv and gate/up: 17 rows gated, 4 rows the
# projection + silu-mul), and give what the two launches give to bf16's precision
calls = []
import graphbench.runner.kernels.norm_gemm as module
real = module.norm_gemm
module.norm_gemm = lambda *a, **kw: calls.append((a[0].shape[0], a[-1] if len(a) > 7 else False)) or real(*a, **kw)
w_qkv, w_gate_up, nw = bf16(96, 128), bf16(128, 128), bf16(128)  # K = 128: one split on 132 SMs
for rows in (4, 17):
    x, res = bf16(rows, 128), bf16(rows, 128, scale=4.0)
    results = {}
    for on in (True, False):
        linear.NORM_IN_GEMM = on
        results[on] = (linear.add_rmsnorm_linear_impl(x, res, nw, eps, w_qkv, None),
                       linear.add_rmsnorm_gate_up_impl(x, res, nw, eps, w_gate_up))
    (qkv, h1), (act, h2) = results[True]
    (want_qkv, want_h), (want_act, _) = results[False]
    assert torch.equal(h1, want_h) and torch.equal(h2, want_h)
    assert rel_err(qkv, want_qkv.double()) < 1e-2 and rel_err(act, want_act.double()) < 2e-2, rows
assert calls == [(4, False), (4, False), (17, False), (17, True)], calls
print("ok")
"""


def test_norm_gemm_equals_the_add_norm_and_the_gemm_in_the_interpreter():
    run_interpreted(NORM_GEMM_CODE)
