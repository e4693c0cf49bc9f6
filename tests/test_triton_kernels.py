"""Triton paged-attention kernels against a naive float64 reference, on the CPU (Triton interpreter).

The interpreter must be switched on (TRITON_INTERPRET=1) before the kernels are defined, and must not
leak into other tests (a GPU run of the same session would run interpreted), so the checks run in one
subprocess: `python tests/test_triton_kernels.py CASE...` prints a JSON verdict per case, and each
pytest case reads its verdict. The helpers `make_case`, `reference_attention` and `check_case` are
also used by tests/gpu/test_triton_kernels_gpu.py.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def make_case(reqs, num_heads, num_kv_heads, head_dim, *, block_size=16, max_reqs=None, num_tokens=None,
              num_blocks=None, max_blocks_per_seq=None, dtype=torch.float32, device="cpu", seed=0,
              strided_inputs=False):
    """A flat batch: reqs = [(q_len, seq_len)], padded to static sizes; the cache holds the context
    (positions < seq_len - q_len) of each request, every other slot holds NaN (a sentinel)."""
    g = torch.Generator().manual_seed(seed)
    max_reqs = max_reqs or len(reqs)
    real = sum(q for q, _ in reqs)
    num_tokens = num_tokens or real
    blocks_per_req = [-(-s // block_size) for _, s in reqs]
    max_blocks_per_seq = max_blocks_per_seq or max(blocks_per_req + [1])
    num_blocks = num_blocks or sum(blocks_per_req) + 3
    assert len(reqs) <= max_reqs and real <= num_tokens and sum(blocks_per_req) <= num_blocks

    def rand(*shape):
        return torch.randn(*shape, generator=g) * 0.7 + 0.1  # random, never zero, not centred

    perm = torch.randperm(num_blocks, generator=g).tolist()  # shuffled, non-contiguous blocks
    block_tables = torch.randint(10**6, 10**7, (max_reqs, max_blocks_per_seq), generator=g, dtype=torch.int32)
    qsl, seq_lens, slots = [0], [], []
    cache_shape = (num_blocks, block_size, num_kv_heads, head_dim)
    k_cache = torch.full(cache_shape, float("nan"))
    v_cache = torch.full(cache_shape, float("nan"))
    for r, (q_len, seq_len) in enumerate(reqs):
        assert 1 <= q_len <= seq_len
        ids = [perm.pop() for _ in range(blocks_per_req[r])]
        block_tables[r, : len(ids)] = torch.tensor(ids, dtype=torch.int32)
        pos = torch.arange(seq_len)
        req_slots = torch.tensor(ids)[pos // block_size] * block_size + pos % block_size
        context = seq_len - q_len  # positions already in the cache
        k_cache.view(-1, num_kv_heads, head_dim)[req_slots[:context]] = rand(context, num_kv_heads, head_dim)
        v_cache.view(-1, num_kv_heads, head_dim)[req_slots[:context]] = rand(context, num_kv_heads, head_dim)
        slots += req_slots[context:].tolist()
        qsl.append(qsl[-1] + q_len)
        seq_lens.append(seq_len)
    qsl += [qsl[-1]] * (max_reqs - len(reqs))
    seq_lens += [0] * (max_reqs - len(reqs))
    slots += [-1] * (num_tokens - real)
    width = num_heads + 2 * num_kv_heads
    if strided_inputs:  # q, k, v as views of one fused qkv projection output
        qkv = rand(num_tokens, width * head_dim)
        q = qkv[:, : num_heads * head_dim].view(num_tokens, num_heads, head_dim)
        k = qkv[:, num_heads * head_dim : (num_heads + num_kv_heads) * head_dim].view(num_tokens, num_kv_heads, head_dim)
        v = qkv[:, (num_heads + num_kv_heads) * head_dim :].view(num_tokens, num_kv_heads, head_dim)
    else:
        q, k, v = rand(num_tokens, num_heads, head_dim), rand(num_tokens, num_kv_heads, head_dim), rand(num_tokens, num_kv_heads, head_dim)
    to = dict(device=device)
    return dict(
        q=q.to(dtype=dtype, **to), k=k.to(dtype=dtype, **to), v=v.to(dtype=dtype, **to),
        k_cache=k_cache.to(dtype=dtype, **to), v_cache=v_cache.to(dtype=dtype, **to),
        slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        block_tables=block_tables.to(device), num_real_tokens=real, num_reqs=len(reqs),
    )


def expected_cache(case):
    """The caches after write_kv_cache, computed in torch."""
    kc, vc = case["k_cache"].clone(), case["v_cache"].clone()
    n, slots = case["num_real_tokens"], case["slot_mapping"]
    _, _, kvh, hd = kc.shape
    kc.view(-1, kvh, hd)[slots[:n]] = case["k"][:n]
    vc.view(-1, kvh, hd)[slots[:n]] = case["v"][:n]
    return kc, vc


def _check_cache(case, want_kc, want_vc, atol=0.0):
    for got, want in ((case["k_cache"], want_kc), (case["v_cache"], want_vc)):
        assert torch.equal(got.isnan(), want.isnan()), "cache written outside the real rows' slots"
        if atol:  # rotary computed in the kernel: the same float32 math, rounded in another order
            torch.testing.assert_close(got.nan_to_num(0.0), want.nan_to_num(0.0), rtol=0, atol=atol)
        else:
            assert torch.equal(got.nan_to_num(0.0), want.nan_to_num(0.0)), "cache contents differ"


def rotary_table(case, theta=10000.0):
    """A RotaryEmbedding table [max_positions, 1, hd] (cos | sin halves) in the case's dtype, for its contexts."""
    from graphbench.runner.rope import RotaryEmbedding

    table = RotaryEmbedding(case["q"].shape[-1], int(case["seq_lens"].max().item()) + 1, theta, None).cos_sin
    return table.to(dtype=case["q"].dtype, device=case["q"].device)


def rotated_inputs(case, cos_sin):
    """(q, k) of a decode case rotated in torch at each row's position seq_len - 1 (padding rows: 0)."""
    from graphbench.runner.rope import apply_rotary

    rows = case["q"].shape[0]
    positions = torch.zeros(rows, dtype=torch.int64, device=case["q"].device)
    n = case["num_real_tokens"]
    positions[:n] = case["seq_lens"][:n].long() - 1
    return apply_rotary(case["q"], positions, cos_sin), apply_rotary(case["k"], positions, cos_sin)


def reference_attention(q, k_cache, v_cache, query_start_loc, seq_lens, block_tables, num_reqs, scale):
    """Per request: gather its keys through the block table, causal softmax, in float64. Real rows only."""
    block_size, kvh, hd = k_cache.shape[1:]
    group = q.shape[1] // kvh
    qsl, lens = query_start_loc.tolist(), seq_lens.tolist()
    outs = []
    for r in range(num_reqs):
        start, end, seq_len = qsl[r], qsl[r + 1], lens[r]
        blocks = block_tables[r, : -(-seq_len // block_size)].long()
        keys = k_cache[blocks].reshape(-1, kvh, hd)[:seq_len].double().repeat_interleave(group, 1)
        values = v_cache[blocks].reshape(-1, kvh, hd)[:seq_len].double().repeat_interleave(group, 1)
        scores = torch.einsum("qhd,shd->hqs", q[start:end].double(), keys) * scale
        pos = torch.arange(seq_len - (end - start), seq_len, device=q.device)
        visible = torch.arange(seq_len, device=q.device)[None, :] <= pos[:, None]
        probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
        outs.append(torch.einsum("hqs,shd->qhd", probs, values))
    return torch.cat(outs) if outs else q.new_zeros((0,) + q.shape[1:], dtype=torch.float64)


def check_case(case, *, num_splits=None, rtol=1e-5, atol=2e-5, rel_err=None, decode=False, rotary=False,
               early_tile=None):
    """Run both kernels on case (in place), compare cache and output; raises AssertionError.

    decode=False: write_kv_cache, then the unified kernel. decode=True: the uniform-decode kernel (every
    real row is one request's new token), which writes the new K/V rows itself and merges its splits;
    rotary=True hands it q and k unrotated with a rotary table (it applies RoPE itself), checked against
    torch's rotation; early_tile=False makes it read the new K/V back from the cache (a large grid's path)."""
    from graphbench.runner.kernels.kv_cache_write import write_kv_cache
    from graphbench.runner.kernels.paged_attention import paged_attention
    from graphbench.runner.kernels.paged_decode import paged_decode

    q_in, k_in, cos_sin = case["q"], case["k"], None
    if rotary:
        cos_sin = rotary_table(case)
        case = dict(case)
        case["q"], case["k"] = rotated_inputs(case, cos_sin)  # what the reference sees
    want_kc, want_vc = expected_cache(case)
    q = case["q"]
    out = torch.full_like(q, float("nan"))
    scale = 1.0 / math.sqrt(q.shape[-1])
    meta = [case[n] for n in ("query_start_loc", "seq_lens", "block_tables")]
    if decode:
        paged_decode(q_in, case["k_cache"], case["v_cache"], out, *meta, scale, (k_in, case["v"], case["slot_mapping"]),
                     num_splits=num_splits, cos_sin=cos_sin, early_tile=early_tile)
        _check_cache(case, want_kc, want_vc, atol=(1e-6 if q.dtype == torch.float32 else 6e-2) if rotary else 0.0)
    else:
        write_kv_cache(case["k"], case["v"], case["k_cache"], case["v_cache"], case["slot_mapping"])
        _check_cache(case, want_kc, want_vc)
        paged_attention(q, case["k_cache"], case["v_cache"], out, *meta, scale, num_splits=num_splits)
    n = case["num_real_tokens"]
    ref = reference_attention(q, want_kc, want_vc, *meta, case["num_reqs"], scale)
    assert torch.isfinite(out).all(), "non-finite output (padding rows or masking)"
    assert (out[n:] == 0).all(), "padding rows must be zero"
    got = out[:n].double()
    if rel_err is None:
        torch.testing.assert_close(got, ref, rtol=rtol, atol=atol)
    else:
        err = ((got - ref).norm() / ref.norm()).item()
        max_err = ((got - ref).abs().max() / ref.abs().max()).item()
        assert err < rel_err and max_err < 2 * rel_err, f"relative error {err:.3g} (max {max_err:.3g})"


# name -> (make_case args, make_case kwargs, num_splits). Small: the interpreter is slow.
CASES = {
    "decode_r1_g2_d64": (([(1, 37)], 4, 2, 64), {}, None),
    "decode_r3_g4_d64": (([(1, 5), (1, 16), (1, 33)], 4, 1, 64), {}, None),
    "decode_r7_g1_d16": (([(1, s) for s in (1, 9, 17, 30, 2, 16, 48)], 2, 2, 16), {"block_size": 8}, None),
    "decode_r7_g2_split4": (([(1, s) for s in (3, 70, 17, 1, 64, 33, 99)], 4, 2, 64), {}, 4),
    "decode_padded_g4_d128": (([(1, 20), (1, 3), (1, 50)], 4, 1, 128), {"max_reqs": 6, "num_tokens": 6}, None),
    "prefill_ragged_g2_d64": (([(1, 1), (17, 17), (40, 40), (33, 33)], 4, 2, 64), {}, None),  # BLOCK_M 128
    "prefill_g7_d16_bs8": (([(5, 5), (19, 19), (1, 1)], 7, 1, 16), {"block_size": 8}, None),
    "mixed_g4_d128": (([(1, 20), (1, 45), (12, 40), (20, 20), (1, 3)], 8, 2, 128), {"strided_inputs": True}, None),
    "mixed_padded_g7_d64": (([(3, 30), (1, 9), (9, 9), (1, 26)], 14, 2, 64),
                            {"max_reqs": 7, "num_tokens": 19, "block_size": 4}, None),
    "mixed_padded_g2_split2": (([(1, 40), (10, 31), (1, 5)], 4, 2, 64), {"max_reqs": 5, "num_tokens": 16}, 2),
    "prefill_padded_g4_split4_bs32": (([(33, 70), (1, 1), (40, 40)], 4, 1, 16),
                                      {"max_reqs": 4, "num_tokens": 80, "block_size": 32}, 4),
    "mixed_bf16_g4_d64": (([(1, 50), (20, 35), (1, 2)], 8, 2, 64), {"dtype": torch.bfloat16}, None),
    "mixed_fp16_g2_split2": (([(1, 50), (20, 35), (1, 2)], 4, 2, 64), {"dtype": torch.float16}, 2),
    "all_padding": (([], 4, 2, 16), {"max_reqs": 2, "num_tokens": 5, "num_blocks": 4, "max_blocks_per_seq": 2}, None),
    # few tokens in an engine with many request slots: the grid covers min(T, max_reqs) slots
    "mixed_few_tokens_many_slots": (([(3, 10), (1, 4)], 4, 2, 16), {"max_reqs": 16, "num_tokens": 6}, None),
    "decode_one_token_many_slots_split2": (([(1, 70)], 4, 2, 64), {"max_reqs": 32, "num_tokens": 1}, 2),
}
# the uniform-decode kernel (runner/kernels/paged_decode.py): one new token per request, padding rows past
# them; the kernel writes the new K/V itself (the split holding the last tile writes), with and without
# splits, a new token opening a block
DECODE_CASES = {
    "decode_kernel_r3_g4_d64": (([(1, 5), (1, 16), (1, 33)], 4, 1, 64), {}, None),
    "decode_kernel_padded_g2_split4": (([(1, 70), (1, 3), (1, 129)], 4, 2, 64), {"max_reqs": 6, "num_tokens": 5}, 4),
    "decode_kernel_g8_bs8_split2": (([(1, 40), (1, 7), (1, 1)], 8, 1, 16), {"block_size": 8}, 2),
    "decode_kernel_bf16_g4": (([(1, 50), (1, 2)], 8, 2, 64), {"dtype": torch.bfloat16, "max_reqs": 4,
                                                               "num_tokens": 3}, None),
    "decode_kernel_all_padding": (([], 4, 2, 16), {"max_reqs": 3, "num_tokens": 2, "num_blocks": 4,
                                                   "max_blocks_per_seq": 2}, 2),
}
# the decode kernel merging its splits: short contexts in fewer active splits than launched, long ones
# merging all of them; padding rows
MERGE_CASES = {
    "decode_merge_short_and_long_split8": (([(1, 40), (1, 300), (1, 129), (1, 500)], 4, 2, 64),
                                           {"max_reqs": 6, "num_tokens": 5}, 8),
    "decode_merge_writes_kv_split8": (([(1, 5), (1, 200), (1, 400)], 4, 1, 64), {}, 8),
    "decode_merge_all_padding": (([], 4, 2, 16), {"max_reqs": 3, "num_tokens": 2, "num_blocks": 4,
                                                  "max_blocks_per_seq": 2}, 4),
}

# the decode kernel applying rotary embedding to q and the new k itself: no split, splits and padding
# rows, long contexts, bfloat16
ROTARY_CASES = {
    "decode_rotary_r3_g4_d64": (([(1, 5), (1, 16), (1, 33)], 4, 1, 64), {}, None),
    "decode_rotary_padded_g2_split4": (([(1, 70), (1, 3), (1, 129)], 4, 2, 64), {"max_reqs": 6, "num_tokens": 5}, 4),
    "decode_rotary_merge_split8": (([(1, 5), (1, 200), (1, 400)], 4, 1, 16), {}, 8),
    "decode_rotary_bf16_g4": (([(1, 50), (1, 2)], 8, 2, 64), {"dtype": torch.bfloat16, "max_reqs": 4, "num_tokens": 3}, None),
    # the tile loop reading the new K/V back (grids of more (row, kv head) pairs than SMs)
    "decode_rotary_loop_padded_g2_split4": (([(1, 70), (1, 3), (1, 129)], 4, 2, 64), {"max_reqs": 6, "num_tokens": 5}, 4),
    "decode_rotary_loop_merge_split8": (([(1, 5), (1, 200), (1, 400)], 4, 1, 16), {}, 8),
}


def check_rotary_qk():
    """kernels/rotary.rotary_qk (the launch before attention for every non-decode batch) against torch's
    rotation, on strided views of one qkv row block, at arbitrary positions."""
    from graphbench.runner.kernels.rotary import rotary_qk
    from graphbench.runner.rope import apply_rotary

    g = torch.Generator().manual_seed(5)
    tokens, heads, kv_heads, hd = 7, 4, 2, 64
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * hd, generator=g)
    q = qkv[:, : heads * hd].view(tokens, heads, hd)
    k = qkv[:, heads * hd : (heads + kv_heads) * hd].view(tokens, kv_heads, hd)
    positions = torch.tensor([0, 3, 3, 17, 40, 1, 99])
    case = {"q": q, "seq_lens": positions}
    cos_sin = rotary_table(case)
    got_q, got_k = rotary_qk(q, k, positions, cos_sin)
    torch.testing.assert_close(got_q, apply_rotary(q, positions, cos_sin), rtol=0, atol=1e-6)
    torch.testing.assert_close(got_k, apply_rotary(k, positions, cos_sin), rtol=0, atol=1e-6)
    assert got_q.is_contiguous() and got_k.is_contiguous()


def check_dummy_slots_write_nothing():
    """The engine's dummy batches (warm-up, profile, capture) have real rows with slot -1: the decode
    kernel writing K/V must then write nothing, neither in the cache nor just outside it (block -1)."""
    from graphbench.runner.kernels.paged_decode import paged_decode

    case = make_case([(1, 20), (1, 33), (1, 300)], 4, 2, 16, seed=11)
    guarded = {}
    for name in ("k_cache", "v_cache"):
        cache = case[name]
        whole = torch.full((cache.shape[0] + 2,) + cache.shape[1:], 12345.0)  # one guard block each side
        whole[1:-1] = cache
        case[name], guarded[name] = whole[1:-1], whole
    case["slot_mapping"].fill_(-1)
    before = {name: whole.clone() for name, whole in guarded.items()}
    out = torch.empty_like(case["q"])
    meta = [case[n] for n in ("query_start_loc", "seq_lens", "block_tables")]
    paged_decode(case["q"], case["k_cache"], case["v_cache"], out, *meta, 0.25, (case["k"], case["v"], case["slot_mapping"]),
                 num_splits=8)
    for name, whole in guarded.items():
        assert torch.equal(whole.isnan(), before[name].isnan()), f"{name}: written with slot -1"
        assert torch.equal(whole.nan_to_num(0.0), before[name].nan_to_num(0.0)), f"{name}: written with slot -1"


DUMMY_SLOT_CASES = ("decode_dummy_slots",)


# every interpreted check, in the order that numbers the cases' seeds (a case's data is the same in
# whichever worker process runs it)
ORDER = [*CASES, *DECODE_CASES, *MERGE_CASES, *ROTARY_CASES, "rotary_qk", *DUMMY_SLOT_CASES]
# the checks are spread over this many interpreter processes at once (every other case to each): the
# interpreter runs one core, and the suite's machine has two
WORKERS = 2


def _run_cases(names):
    results = {}
    for name in names:
        if name in DUMMY_SLOT_CASES or name == "rotary_qk":
            start = time.perf_counter()
            try:
                if name == "rotary_qk":
                    check_rotary_qk()
                else:
                    check_dummy_slots_write_nothing()
                verdict = "ok"
            except Exception as exc:  # noqa: BLE001  (reported back to the parent test)
                verdict = f"{type(exc).__name__}: {exc}"
            results[name] = {"verdict": verdict, "seconds": round(time.perf_counter() - start, 2)}
            continue
        args, kwargs, splits = {**CASES, **DECODE_CASES, **MERGE_CASES, **ROTARY_CASES}[name]
        start = time.perf_counter()
        try:
            low_precision = kwargs.get("dtype", torch.float32) != torch.float32
            check_case(make_case(*args, seed=ORDER.index(name) + 1, **kwargs), num_splits=splits,
                       rel_err=2e-2 if low_precision else None, decode=name not in CASES,
                       rotary=name in ROTARY_CASES, early_tile=False if "loop" in name else None)
            verdict = "ok"
        except Exception as exc:  # noqa: BLE001  (reported back to the parent test)
            verdict = f"{type(exc).__name__}: {exc}"
        results[name] = {"verdict": verdict, "seconds": round(time.perf_counter() - start, 2)}
    return results


@pytest.fixture(scope="module")
def interpreter_results():
    from tests.interpreted import run_at_once  # (here: this file also runs as the workers' script)

    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    env = dict(os.environ, TRITON_INTERPRET="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    runs = run_at_once([[sys.executable, __file__, *ORDER[i::WORKERS]] for i in range(WORKERS)], env, 900, cwd=ROOT)
    results = {}
    for returncode, stdout, stderr in runs:
        if returncode != 0 or not stdout.strip():
            pytest.fail(f"interpreter subprocess failed ({returncode}):\n{stderr[-4000:]}")
        results.update(json.loads(stdout.strip().splitlines()[-1]))
    assert sorted(results) == sorted(ORDER)
    return results


@pytest.mark.parametrize("name", ORDER)
def test_triton_kernels_interpreted(name, interpreter_results):
    assert interpreter_results[name]["verdict"] == "ok", interpreter_results[name]["verdict"]


def test_attention_and_decode_configs_are_shape_only():
    """The unified kernel's config, and the decode kernel's (paged_decode.decode_config) on a 132-SM GPU: a
    grid of fewer than 2 x SMs (row, kv head) pairs splits the context into one-stage 64-key tiles, with 8
    warps while there are at most SMs / 4 pairs (benchmarks/RESULTS.md, 2026-12-02); a larger one keeps the
    pipelined tiles; float32 and no GPU (num_sms None) keep their own."""
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed")
    code = (
        "import json, torch; from graphbench.runner.kernels.paged_attention import attention_config as c;"
        "from graphbench.runner.kernels.paged_decode import decode_config as d; b = torch.bfloat16;"
        "print(c(1, 1, 32, 8, 128, torch.bfloat16, 132)['NUM_SPLITS'], c(256, 256, 32, 8, 64, torch.bfloat16, 132)"
        "['NUM_SPLITS'], c(2048, 8, 32, 8, 64, torch.bfloat16, 132)['BLOCK_M'], c(1, 1, 32, 8, 64, torch.float16)['NUM_SPLITS']);"
        "print(json.dumps([d(1, 8, 64, b, 132), d(4, 8, 128, b, 132), d(5, 8, 128, b, 132), d(16, 8, 128, b, 132),"
        " d(64, 8, 128, b, 132), d(64, 8, 64, b, 132), d(1, 8, 128, torch.float32, 132), d(1, 8, 64, b, None)]))"
    )
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT / "src"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    unified, decode = out.stdout.strip().split("\n")
    assert unified.split() == ["32", "1", "128", "1"]

    def blocks(tile_n, splits, warps, stages):
        return {"TILE_N": tile_n, "NUM_SPLITS": splits, "num_warps": warps, "num_stages": stages}

    assert json.loads(decode) == [blocks(64, 32, 8, 1), blocks(64, 32, 8, 1), blocks(64, 16, 4, 1), blocks(64, 8, 4, 1),
                                  blocks(64, 1, 4, 2), blocks(128, 1, 4, 2), blocks(32, 32, 4, 2), blocks(128, 1, 4, 2)]

if __name__ == "__main__":
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    print(json.dumps(_run_cases(sys.argv[1:] or ORDER)))
