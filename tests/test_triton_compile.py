"""graphbench's Triton kernels compile for an H100/H200 (sm_90) on a machine without a GPU.

The interpreter tests check what the kernels compute; this checks that Triton's compiler accepts them
(types, constexpr use, control flow) down to a cubin with the ptxas that ships with Triton, so a
kernel that cannot compile is caught before a GPU run.
"""

from __future__ import annotations

import itertools

import pytest

triton = pytest.importorskip("triton")


def compile_sm90(fn, signature: dict[str, str], constexprs: dict[str, object], divisible: tuple[str, ...] = (),
                 options: dict | None = None):
    """divisible: arguments a launch would specialise as multiples of 16 (aligned pointers, ints);
    options: launch options such as num_warps."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    # constexprs left out take their defaults, as a launch would (ASTSource applies none itself)
    defaults = {name: p.default for name, p in fn.signature.parameters.items()
                if name not in signature and name not in constexprs and p.default is not p.empty}
    constexprs = {**defaults, **constexprs}
    sig = dict(signature, **{name: "constexpr" for name in constexprs})
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in divisible}
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs, attrs=attrs),
                          target=GPUTarget("cuda", 90, 32), options=options)


def _ptxas_available() -> bool:
    """Triton's NVIDIA backend with its bundled ptxas (a CPU-only install of Triton may lack them)."""
    try:
        from pathlib import Path

        import triton.backends.nvidia as nvidia

        return (Path(nvidia.__file__).parent / "bin" / "ptxas").is_file()
    except Exception:  # noqa: BLE001 - a Triton without the NVIDIA backend
        return False


pytestmark = pytest.mark.skipif(not _ptxas_available(), reason="Triton's NVIDIA backend (ptxas) is not installed")

BF16 = "*bf16"


@pytest.mark.parametrize("has_bias", [False, True])
def test_gemv_compiles(has_bias):
    from graphbench.runner.kernels.gemv import _gemv_kernel

    sig = {"x_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16, "y_ptr": BF16, "N": "i32", "K": "i32", "stride_wn": "i32"}
    kernel = compile_sm90(_gemv_kernel, sig, {"HAS_BIAS": has_bias, "BLOCK_N": 4, "BLOCK_K": 1024, "EVEN_K": True,
                                              "INTERPRET": False})
    assert kernel.asm["cubin"]


def test_gemv_whole_row_tile_compiles_without_local_memory():
    """The large-matrix rule at K = 4096 (llama-3.1-8b): one [2, 4096] tile with 4 warps, no spills."""
    from graphbench.runner.kernels.gemv import _gemv_kernel
    from graphbench.runner.kernel_choice import gemv_rule

    block_n, block_k, warps = gemv_rule(6144, 4096)
    sig = {"x_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16, "y_ptr": BF16, "N": "i32", "K": "i32", "stride_wn": "i32"}
    kernel = compile_sm90(_gemv_kernel, sig, {"HAS_BIAS": False, "BLOCK_N": block_n, "BLOCK_K": block_k,
                                              "EVEN_K": True, "INTERPRET": False, "PDL": True},
                          divisible=("x_ptr", "w_ptr", "y_ptr", "N", "K", "stride_wn"),
                          options={"num_warps": warps, "num_stages": 1})
    assert (block_n, block_k, warps) == (2, 4096, 4)
    assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


@pytest.mark.parametrize("k, block_n, block_k, warps, stages", [(576, 4, 1024, 4, 1), (4864, 1, 8192, 8, 1),
                                                                 (4864, 4, 256, 2, 3)])
def test_masked_and_pipelined_gemvs_compile_without_local_memory(k, block_n, block_k, warps, stages):
    """Start-up's one-row candidates where K is no power of two: the whole row (SmolLM2's 576 as 512 + 64,
    qwen2.5-0.5b's down 4864 as 4096 + 512 + 256: every weight load before the PDL wait), and a K loop of 19
    tiles with 3 in flight; plain, gated, and with the add-norm folded in (the masked tile): no spills."""
    from graphbench.runner.kernels.gemv import _gated_gemv_kernel, _gemv_kernel, _row_layout
    from graphbench.runner.kernels.norm_gemv import _norm_gemv_kernel

    even = k % block_k == 0
    sig = {"x_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16, "y_ptr": BF16, "N": "i32", "K": "i32", "stride_wn": "i32"}
    common = {"BLOCK_N": block_n, "BLOCK_K": block_k, "INTERPRET": False, "PDL": True,
              **_row_layout(k, block_k, stages)}
    options = {"num_warps": warps, "num_stages": 1}

    def loads_before_wait(kernel) -> int:
        ptx = kernel.asm["ptx"]
        return ptx[:ptx.index("griddepcontrol.wait")].count("ld.global")

    kernel = compile_sm90(_gemv_kernel, sig, dict(common, HAS_BIAS=False),
                          divisible=("x_ptr", "w_ptr", "y_ptr", "N", "K", "stride_wn"), options=options)
    assert loads_before_wait(kernel) > 0  # the first weight tile (the whole row's pieces) before the wait
    assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)
    if stages > 1:  # each stage's tile is loaded before the wait
        one = compile_sm90(_gemv_kernel, sig, dict(common, HAS_BIAS=False, STAGES=1),
                           divisible=("x_ptr", "w_ptr", "y_ptr", "N", "K", "stride_wn"), options=options)
        assert loads_before_wait(kernel) == stages * loads_before_wait(one)
    gated = {name: t for name, t in sig.items() if name != "b_ptr"}
    kernel = compile_sm90(_gated_gemv_kernel, gated, dict(common, BLOCK_N=max(1, block_n // 2)),  # (its candidates')
                          divisible=("x_ptr", "w_ptr", "y_ptr", "N", "K", "stride_wn"), options=options)
    assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)
    if not even:
        norm = {"x_ptr": BF16, "r_ptr": BF16, "nw_ptr": BF16, "h_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16,
                "y_ptr": BF16, "N": "i32", "K": "i32", "stride_wn": "i32", "eps": "fp32"}
        one_tile = {name: v for name, v in common.items() if name != "STAGES" and not name.startswith("PIECE")}
        kernel = compile_sm90(_norm_gemv_kernel, norm, dict(one_tile, HAS_BIAS=False, GATED=False, ROW_BLOCK=block_k),
                              divisible=("x_ptr", "r_ptr", "nw_ptr", "h_ptr", "w_ptr", "y_ptr", "N", "K", "stride_wn"),
                              options=options)
        assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


@pytest.mark.parametrize("shape", [(16384, 2048), (28672, 4096)])
def test_gated_gemv_compiles_without_local_memory(shape):
    """The one-row gate/up GEMV with the activation in its epilogue, with the rule's blocks for llama-3.2-1b's
    and llama-3.1-8b's [gate; up] weights, and PDL: no spills, no local memory."""
    from graphbench.runner.kernels.gemv import _gated_gemv_kernel
    from graphbench.runner.kernel_choice import gemv_rule

    block_n, block_k, warps = gemv_rule(*shape)
    sig = {"x_ptr": BF16, "w_ptr": BF16, "y_ptr": BF16, "N": "i32", "K": "i32", "stride_wn": "i32"}
    kernel = compile_sm90(_gated_gemv_kernel, sig, {"BLOCK_N": max(1, block_n // 2), "BLOCK_K": block_k,
                                                    "EVEN_K": True, "INTERPRET": False, "PDL": True},
                          divisible=("x_ptr", "w_ptr", "y_ptr", "N", "K", "stride_wn"),
                          options={"num_warps": warps, "num_stages": 1})
    assert "griddepcontrol.wait" in kernel.asm["ptx"]
    assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


def test_add_rmsnorm_compiles():
    from graphbench.runner.kernels.add_rmsnorm import _add_rmsnorm_kernel

    sig = {"x_ptr": BF16, "r_ptr": BF16, "nw_ptr": BF16, "out_ptr": BF16, "h_ptr": BF16, "K": "i32",
           "stride_x": "i32", "stride_r": "i32", "eps": "fp32"}
    assert compile_sm90(_add_rmsnorm_kernel, sig, {"BLOCK": 2048}).asm["cubin"]


def test_silu_mul_and_argmax_compile():
    from graphbench.runner.kernels.argmax import _chunk_argmax_kernel, _row_argmax_kernel
    from graphbench.runner.kernels.gemv import _silu_mul_kernel

    sig = {"x_ptr": BF16, "y_ptr": BF16, "K": "i32", "stride_x": "i32", "stride_y": "i32"}
    assert compile_sm90(_silu_mul_kernel, sig, {"BLOCK": 1024}).asm["cubin"]
    sig = {"logits_ptr": BF16, "values_ptr": "*fp32", "indices_ptr": "*i32", "vocab": "i32", "stride_row": "i32",
           "num_chunks": "i32"}
    assert compile_sm90(_chunk_argmax_kernel, sig, {"BLOCK": 2048}).asm["cubin"]
    sig = {"values_ptr": "*fp32", "indices_ptr": "*i32", "out_ptr": "*i64", "marked_ptr": "*i64", "num_chunks": "i32"}
    for mark in (False, True):  # (the host's copy with NaN rows flagged, or not)
        assert compile_sm90(_row_argmax_kernel, sig, {"BLOCK_C": 64, "MARK": mark}).asm["cubin"]


@pytest.mark.parametrize("split", [False, True])
def test_attention_kernels_compile(split):
    from graphbench.runner.kernels.paged_attention import _attention_kernel
    from graphbench.runner.kernels.split_merge import _merge_splits_kernel
    from graphbench.runner.kernels.paged_decode import _decode_kernel

    pointers = {"q_ptr": BF16, "k_cache_ptr": BF16, "v_cache_ptr": BF16, "out_ptr": BF16, "part_ptr": "*fp32",
                "lse_ptr": "*fp32", "qsl_ptr": "*i32", "seq_lens_ptr": "*i32", "block_tables_ptr": "*i32"}
    strides = {name: "i32" for name in ("stride_qt", "stride_qh", "stride_ot", "stride_oh", "stride_kb", "stride_ko",
                                         "stride_kh", "stride_vb", "stride_vo", "stride_vh", "stride_bt")}
    shared = {"GROUP": 4, "BLOCK_M": 16, "HEAD_DIM": 64, "BLOCK_D": 64, "BLOCK_SIZE": 16, "TILE_N": 128,
              "PRECISION": "tf32", "INTERPRET": False}
    decode = dict(pointers, k_ptr=BF16, v_ptr=BF16, slot_ptr="*i64", scale="fp32", max_reqs="i32", num_heads="i32",
                  num_splits="i32", stride_nkt="i32", stride_nkh="i32", stride_nvt="i32", stride_nvh="i32", **strides)
    decode.update(count_ptr="*i32", cos_sin_ptr=BF16, stride_cs="i32")
    # (no rotary, no PDL; rotary and the early tile under PDL; the same with the tile loop)
    for rotary, early_tile, pdl in ((False, False, False), (True, True, True), (True, False, True)):
        kernel = compile_sm90(_decode_kernel, decode, dict(shared, SPLIT=split, MIN_TILES=4, ROTARY=rotary,
                                                           EARLY_TILE=early_tile, PDL=pdl))
        ptx = kernel.asm["ptx"]
        assert kernel.asm["cubin"] and ("griddepcontrol.wait" in ptx) == pdl
        if pdl:  # the metadata (and the first cached K/V tile, the rotary table) load before the wait
            before_wait = ptx[:ptx.index("griddepcontrol.wait")].count("ld.global")
            assert before_wait >= (4 if early_tile else 3), before_wait
    unified = dict(pointers, scale="fp32", num_tokens="i32", max_reqs="i32", num_heads="i32", **strides)
    assert compile_sm90(_attention_kernel, unified, dict(shared, BLOCK_Q=4, NUM_SPLITS=4 if split else 1)).asm["cubin"]
    merge = {"part_ptr": "*fp32", "lse_ptr": "*fp32", "out_ptr": BF16, "qsl_ptr": "*i32", "max_reqs": "i32",
             "num_heads": "i32", "num_splits": "i32", "stride_ot": "i32", "stride_oh": "i32"}
    assert compile_sm90(_merge_splits_kernel, merge, {"HEAD_DIM": 64, "BLOCK_D": 64, "MAX_SPLITS": 16}).asm["cubin"]


def test_rotary_kernel_compiles():
    from graphbench.runner.kernels.rotary import _rotary_qk_kernel

    sig = {"q_ptr": BF16, "k_ptr": BF16, "q_out_ptr": BF16, "k_out_ptr": BF16, "pos_ptr": "*i64", "cs_ptr": BF16,
           "num_heads": "i32", "num_kv_heads": "i32", "stride_qt": "i32", "stride_qh": "i32", "stride_kt": "i32",
           "stride_kh": "i32", "stride_cs": "i32"}
    for pdl in (False, True):
        kernel = compile_sm90(_rotary_qk_kernel, sig, {"HEAD_DIM": 128, "BLOCK_D": 128, "PDL": pdl}, options={"num_warps": 1})
        assert kernel.asm["cubin"] and ("griddepcontrol.wait" in kernel.asm["ptx"]) == pdl


def test_pdl_variants_compile_with_grid_dependency_control():
    """GRAPHBENCH_PDL=1 compiles the kernels with PDL=True: each waits for the previous kernel and then
    lets the next launch (griddepcontrol in the PTX); with PDL=False neither instruction is there."""
    from graphbench.runner.kernels.add_rmsnorm import _add_rmsnorm_kernel
    from graphbench.runner.kernels.argmax import _chunk_argmax_kernel, _row_argmax_kernel
    from graphbench.runner.kernels.gemv import _gemv_kernel, _silu_mul_kernel

    gemv = {"x_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16, "y_ptr": BF16, "N": "i32", "K": "i32", "stride_wn": "i32"}
    norm = {"x_ptr": BF16, "r_ptr": BF16, "nw_ptr": BF16, "out_ptr": BF16, "h_ptr": BF16, "K": "i32",
            "stride_x": "i32", "stride_r": "i32", "eps": "fp32"}
    silu = {"x_ptr": BF16, "y_ptr": BF16, "K": "i32", "stride_x": "i32", "stride_y": "i32"}
    chunk = {"logits_ptr": BF16, "values_ptr": "*fp32", "indices_ptr": "*i32", "vocab": "i32", "stride_row": "i32",
             "num_chunks": "i32"}
    rows = {"values_ptr": "*fp32", "indices_ptr": "*i32", "out_ptr": "*i64", "marked_ptr": "*i64", "num_chunks": "i32"}
    cases = [(_gemv_kernel, gemv, {"HAS_BIAS": False, "BLOCK_N": 4, "BLOCK_K": 1024, "EVEN_K": True, "INTERPRET": False}),
             (_add_rmsnorm_kernel, norm, {"BLOCK": 2048}), (_silu_mul_kernel, silu, {"BLOCK": 1024}),
             (_chunk_argmax_kernel, chunk, {"BLOCK": 2048}), (_row_argmax_kernel, rows, {"BLOCK_C": 64, "MARK": True})]
    for fn, sig, constexprs in cases:
        with_pdl = compile_sm90(fn, sig, dict(constexprs, PDL=True)).asm["ptx"]
        without = compile_sm90(fn, sig, dict(constexprs, PDL=False)).asm["ptx"]
        assert "griddepcontrol.wait" in with_pdl and "griddepcontrol.launch_dependents" in with_pdl, fn.__name__
        assert "griddepcontrol" not in without, fn.__name__
        if fn is _gemv_kernel:  # its first weight tile is loaded before the wait (weights are never written)
            assert "ld.global" in with_pdl[:with_pdl.index("griddepcontrol.wait")]
    early = compile_sm90(_add_rmsnorm_kernel, norm, {"BLOCK": 2048, "PDL": True}).asm["ptx"]
    before_wait = early[:early.index("griddepcontrol.wait")]
    assert before_wait.count("ld.global") >= 2  # the norm weight and the residual load before the wait
    assert "st.global" not in before_wait


def _stack_and_local_bytes(cubin: bytes) -> tuple[int, int]:
    """(STACK, LOCAL) of the cubin's kernel, from the cuobjdump in Triton's wheel: spills show as stack."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    import triton.backends.nvidia as nvidia

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([str(Path(nvidia.__file__).parent / "bin" / "cuobjdump"), "-res-usage", f.name],
                             capture_output=True, text=True, check=True).stdout
    stack, local = re.search(r"STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", out).groups()
    return int(stack), int(local)


def test_lora_kernels_compile_without_local_memory():
    """The shrink and expand kernels at llama-3.2-1b's decode block (qkv at rank 16: R' 48) and a prefill
    chunk's (qkv at rank 64: R' 192, 8 warps), with the launch's divisibility: no spills, no local memory."""
    from graphbench.runner.kernels.lora_bgmv import _expand_kernel
    from graphbench.runner.kernels.lora_blocks import lora_blocks
    from graphbench.runner.kernels.lora_shrink import _shrink_kernel

    shrink = {"x_ptr": BF16, "a_ptr": BF16, "idx_ptr": "*i32", "part_ptr": "*fp32", "sum_ptr": "*fp32",
              "count_ptr": "*i32", "T": "i32", "K": "i32", "R": "i32", "stride_xt": "i32", "stride_al": "i32",
              "stride_ar": "i32"}
    expand = {"v_ptr": "*fp32", "b_ptr": BF16, "idx_ptr": "*i32", "out_ptr": BF16, "T": "i32", "N": "i32",
              "R": "i32", "seg1": "i32", "seg2": "i32", "stride_bl": "i32", "stride_bn": "i32", "stride_ot": "i32"}
    # (T, K, R', segments, adapter slots): qkv's and o's decode blocks (4 slots in one dot), a prefill chunk's
    # and batch-1 decode's expand at rank 64 and K 8192, at K 14336 (56 splits), qkv's shrink at rank 128
    for t, k, r, segments, slots, pdl in ((16, 2048, 48, 3, 4, True), (16, 2048, 16, 1, 4, True),
                                          (512, 2048, 192, 3, 4, False), (512, 2048, 48, 3, 8, False),
                                          (1, 8192, 64, 1, 2, True), (1, 14336, 16, 1, 4, True),
                                          (1, 4096, 384, 3, 1, True)):
        cfg = lora_blocks(t, k, r, segments, slots)
        common = {"BLOCK_T": cfg["BLOCK_T"], "PRECISION": "tf32", "INTERPRET": False, "PDL": pdl}
        kernel = compile_sm90(_shrink_kernel, shrink, dict(common, BLOCK_R=cfg["BLOCK_R"], BLOCK_K=cfg["BLOCK_K"],
                                                           K_SPLIT=cfg["K_SPLIT"], SPLIT_K=cfg["SPLIT_K"],
                                                           SUM_COLS=cfg["SUM_COLS"], GROUP=cfg["SHRINK_GROUP"]),
                              divisible=("x_ptr", "a_ptr", "idx_ptr", "part_ptr", "sum_ptr", "K", "R", "stride_xt",
                                         "stride_al", "stride_ar"),
                              options={"num_warps": cfg["shrink_warps"], "num_stages": 2})
        assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0), ("shrink", t, k, r)
        assert ("griddepcontrol.wait" in kernel.asm["ptx"]) == pdl and "mma" in kernel.asm["ptx"]
        assert ("atom" in kernel.asm["ptx"]) == (cfg["SPLIT_K"] > 1)  # the count of finished splits
        kernel = compile_sm90(_expand_kernel, expand, dict(common, NUM_SEG=segments,
                                                           BLOCK_N=cfg["BLOCK_N"], BLOCK_RS=cfg["BLOCK_RS"],
                                                           GROUP=cfg["GROUP"]),
                              divisible=("v_ptr", "b_ptr", "idx_ptr", "out_ptr", "N", "R", "stride_bl", "stride_bn",
                                         "stride_ot"), options={"num_warps": cfg["expand_warps"], "num_stages": 2})
        assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0), ("expand", t, k, r)
        assert ("griddepcontrol.wait" in kernel.asm["ptx"]) == pdl and "mma" in kernel.asm["ptx"]


# the skinny GEMMs' LoRA epilogue arguments (kernels/skinny_gemm.py), and their constexprs without it
LORA_SIG = {"lora_v": "*fp32", "lora_b": BF16, "lora_idx": "*i32", "lora_r": "i32", "lora_seg1": "i32",
            "lora_seg2": "i32", "lora_stride_bl": "i32", "lora_stride_bn": "i32"}
NO_LORA = {"LORA": False, "LORA_SEGMENTS": 1, "LORA_BLOCK_RS": 16, "LORA_GROUP": 1,
           "LORA_PRECISION": "ieee"}


@pytest.mark.parametrize("split_k", [1, 8])
def test_skinny_gemm_compiles_without_local_memory(split_k):
    """The split-K GEMM at 64 rows (wgmma tiles) and 16, with PDL: no spills, no local memory."""
    from graphbench.runner.kernel_choice import skinny_rule
    from graphbench.runner.kernels.skinny_gemm import _skinny_kernel

    BLOCK_N, BLOCK_K = skinny_rule(2048, 2048, 132)[:2]

    sig = {"x_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16, "y_ptr": BF16, "part_ptr": "*fp32", "count_ptr": "*i32",
           "M": "i32", "N": "i32", "stride_xm": "i32", "stride_wn": "i32", "stride_ym": "i32", **LORA_SIG}
    for block_m in (16, 64):
        kernel = compile_sm90(_skinny_kernel, sig, {"HAS_BIAS": False, "BLOCK_M": block_m, "BLOCK_N": BLOCK_N,
                                                    "BLOCK_K": BLOCK_K, "SPLIT_K": split_k, "K_PER_SPLIT": 2048 // split_k,
                                                    **NO_LORA, "INTERPRET": False, "PDL": True},
                              divisible=("x_ptr", "w_ptr", "y_ptr", "part_ptr", "N", "stride_xm", "stride_wn", "stride_ym"),
                              options={"num_warps": 4, "num_stages": 4})
        assert "griddepcontrol.wait" in kernel.asm["ptx"]
        assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


def test_gated_skinny_gemm_compiles_without_local_memory():
    """The gate/up GEMM with the activation in its epilogue at 32 and 64 rows (the engine runs it for 17..64),
    with blocks start-up times for llama-3.1-8b (the best of its hand-searched grid) and PDL: no spills, no
    local memory, its K loop pipelined (cp.async) into tensor-core dots."""
    from graphbench.runner.kernel_choice import gated_skinny_candidates, gated_skinny_neighbours
    from graphbench.runner.kernels.skinny_gemm import _gated_kernel

    block_n, block_k, warps, stages = 32, 64, 4, 3
    assert (block_n, block_k, warps, stages) in gated_skinny_neighbours((32, 64, 4, 4))
    assert (32, 64, 4, 4) in gated_skinny_candidates(4096)
    sig = {"x_ptr": BF16, "w_ptr": BF16, "y_ptr": BF16, "M": "i32", "N": "i32", "stride_xm": "i32",
           "stride_wn": "i32", "stride_ym": "i32", **LORA_SIG}
    for block_m in (32, 64):
        kernel = compile_sm90(_gated_kernel, sig, {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k,
                                                   "K": 4096, **NO_LORA, "INTERPRET": False, "PDL": True},
                              divisible=("x_ptr", "w_ptr", "y_ptr", "N", "stride_xm", "stride_wn", "stride_ym"),
                              options={"num_warps": warps, "num_stages": stages})
        ptx = kernel.asm["ptx"]
        assert "griddepcontrol.wait" in ptx and "cp.async" in ptx and "mma" in ptx
        assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


def _local_memory_in_k_loops(cubin: bytes) -> tuple[int, list[str]]:
    """(the loops that stream weights (LDGSTS: the K loop), the local-memory loads and stores (spills: LDL,
    STL) inside them), from the cubin's SASS (cuobjdump): a spill there costs every iteration, one after it once."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    import triton.backends.nvidia as nvidia

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run([str(Path(nvidia.__file__).parent / "bin" / "cuobjdump"), "-sass", f.name],
                              capture_output=True, text=True, check=True).stdout
    code = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    loops, found = 0, []
    for address, text in code:
        branch = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address:  # a backward branch closes a loop
            body = [t for a, t in code if int(branch.group(1), 16) <= a <= address]
            if any("LDGSTS" in t for t in body):
                loops += 1
                found += [t.strip() for t in body if re.search(r"\b(LDL|STL)\b", t)]
    return loops, found


def test_skinny_gemms_with_the_lora_epilogue_keep_their_k_loop_free_of_local_memory():
    """The skinny GEMM (one split and 4) and the gated GEMM with each row's adapter delta in their epilogue, at
    llama-3.2-1b's 16-row decode block (qkv at rank 16: R' 48 over 3 segments; o and down at R' 16, down at
    rank 64; gate/up R' 32 over 2), with 1 and 4 adapter slots, PDL: the rows' adapter
    slots load before the wait, the deltas run on tensor cores, and no spill lands in the K loop (holding the
    slots across the loop may leave a word spilled once after it: 4 slots in the gated GEMM, 8 bytes)."""
    from graphbench.runner.kernels.lora_blocks import lora_blocks
    from graphbench.runner.kernels.skinny_gemm import _gated_kernel, _skinny_kernel

    divisible = ("x_ptr", "w_ptr", "y_ptr", "N", "stride_xm", "stride_wn", "stride_ym", "lora_v", "lora_b",
                 "lora_idx", "lora_r", "lora_stride_bl", "lora_stride_bn")
    plain = {"x_ptr": BF16, "w_ptr": BF16, "b_ptr": BF16, "y_ptr": BF16, "part_ptr": "*fp32", "count_ptr": "*i32",
             "M": "i32", "N": "i32", "stride_xm": "i32", "stride_wn": "i32", "stride_ym": "i32", **LORA_SIG}
    gated = {"x_ptr": BF16, "w_ptr": BF16, "y_ptr": BF16, "M": "i32", "N": "i32", "stride_xm": "i32",
             "stride_wn": "i32", "stride_ym": "i32", **LORA_SIG}

    def check(kernel, case, without_lora):
        ptx = kernel.asm["ptx"]
        assert "ld.global" in ptx[:ptx.index("griddepcontrol.wait")], case  # the adapter slots, before the wait
        assert ptx.count("mma") > without_lora.asm["ptx"].count("mma"), case  # the delta's dots
        loops, spills = _local_memory_in_k_loops(kernel.asm["cubin"])
        assert loops >= 1 and spills == [], (case, loops, spills)
        assert _stack_and_local_bytes(kernel.asm["cubin"])[0] <= 32, case

    def skinny(k, split_k, lora):
        return compile_sm90(_skinny_kernel, plain, {"HAS_BIAS": False, "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128,
                                                    "SPLIT_K": split_k, "K_PER_SPLIT": k // split_k, **lora,
                                                    "INTERPRET": False, "PDL": True},
                            divisible=divisible, options={"num_warps": 4, "num_stages": 4})

    def gated_gemm(lora):
        return compile_sm90(_gated_kernel, gated, {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 128, "K": 2048, **lora,
                                                   "INTERPRET": False, "PDL": True},
                            divisible=divisible, options={"num_warps": 4, "num_stages": 4})

    # (K, R', segments): qkv, o, down at rank 16; down at rank 64
    plain_kernels = {}  # (K, GEMM splits) -> the kernel without LoRA
    for (k, r, segments), slots, split_k in itertools.product(
            ((2048, 48, 3), (2048, 16, 1), (8192, 16, 1), (8192, 64, 1)), (1, 4), (1, 4)):
        cfg = lora_blocks(16, k, r, segments, slots)
        lora = {"LORA": True, "LORA_SEGMENTS": segments,
                "LORA_BLOCK_RS": cfg["BLOCK_RS"], "LORA_GROUP": cfg["GROUP"], "LORA_PRECISION": "tf32"}
        if (k, split_k) not in plain_kernels:
            plain_kernels[k, split_k] = skinny(k, split_k, NO_LORA)
        check(skinny(k, split_k, lora), (k, r, slots, split_k), plain_kernels[k, split_k])
    gated_plain = gated_gemm(NO_LORA)
    for slots in (1, 4):
        cfg = lora_blocks(16, 2048, 32, 2, slots)
        check(gated_gemm({"LORA": True, "LORA_SEGMENTS": 2, "LORA_BLOCK_RS": cfg["BLOCK_RS"],
                          "LORA_GROUP": cfg["GROUP"], "LORA_PRECISION": "tf32"}), ("gate_up", slots), gated_plain)


@pytest.mark.parametrize("k, r", [(2048, 48), (2048, 32), (4096, 48)])
def test_add_norm_with_the_lora_shrink_compiles_without_local_memory(k, r):
    """The add-norm + shrink launch at llama-3.2-1b's and llama-3.1-8b's hidden sizes (qkv's R' 48, gate/up's
    32 at rank 16), as add_rmsnorm_shrink launches it, PDL: the adapter's A tile loads before the wait, no
    spills."""
    from graphbench.runner.kernels.lora_row_shrink import _add_rmsnorm_shrink_kernel, row_blocks

    cfg = row_blocks(k, r)
    sig = {"x_ptr": BF16, "r_ptr": BF16, "nw_ptr": BF16, "out_ptr": BF16, "h_ptr": BF16, "a_ptr": BF16,
           "idx_ptr": "*i32", "v_ptr": "*fp32", "T": "i32", "K": "i32", "R": "i32", "stride_x": "i32",
           "stride_r": "i32", "stride_al": "i32", "stride_ar": "i32", "eps": "fp32"}
    kernel = compile_sm90(_add_rmsnorm_shrink_kernel, sig, {"BLOCK": cfg["BLOCK"], "BLOCK_R": cfg["BLOCK_R"], "PDL": True},
                          divisible=("x_ptr", "r_ptr", "nw_ptr", "out_ptr", "h_ptr", "a_ptr", "v_ptr", "K",
                                     "R", "stride_x", "stride_r", "stride_al", "stride_ar"),
                          options={"num_warps": cfg["num_warps"]})
    ptx = kernel.asm["ptx"]
    assert ptx[:ptx.index("griddepcontrol.wait")].count("ld.global") >= 3  # the norm weight, residual, A
    assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


@pytest.mark.parametrize("k, r", [(2048, 16), (8192, 16), (4096, 64), (576, 16), (4864, 16), (14336, 16)])
def test_the_row_shrink_compiles_without_local_memory(k, r):
    """The shrink one row a program at o's and down's K (llama-3.2-1b, llama-3.1-8b, SmolLM2, qwen2.5-0.5b),
    as row_shrink launches it, PDL: the row's A tile loads before the wait (only x after it), no spills."""
    from graphbench.runner.kernels.lora_row_shrink import _row_shrink_kernel, row_blocks

    cfg = row_blocks(k, r)
    sig = {"x_ptr": BF16, "a_ptr": BF16, "idx_ptr": "*i32", "v_ptr": "*fp32", "K": "i32", "R": "i32",
           "stride_x": "i32", "stride_al": "i32", "stride_ar": "i32"}
    kernel = compile_sm90(_row_shrink_kernel, sig, {"BLOCK": cfg["BLOCK"], "BLOCK_R": cfg["BLOCK_R"], "PDL": True},
                          divisible=("x_ptr", "a_ptr", "v_ptr", "R", "stride_x", "stride_al", "stride_ar"),
                          options={"num_warps": cfg["num_warps"]})
    ptx = kernel.asm["ptx"]
    before, after = ptx.split("griddepcontrol.wait", 1)
    assert before.count("ld.global") >= 2 and "ld.global" in after  # idx and A before the wait, x after
    assert _stack_and_local_bytes(kernel.asm["cubin"]) == (0, 0)


@pytest.mark.parametrize("has_lora", [False, True])
def test_step_inputs_unpack_compiles(has_lora):
    from graphbench.runner.kernels.step_inputs import BLOCK, _unpack_kernel

    sig = {"packet_ptr": "*i32", "sampled_ptr": "*i64", "ids_ptr": "*i64", "pos_ptr": "*i64", "slot_ptr": "*i64",
           "logits_ptr": "*i64", "qsl_ptr": "*i32", "lens_ptr": "*i32", "bt_ptr": "*i32", "lora_ptr": "*i32",
           "P": "i32", "R_MAX": "i32", "stride_bt": "i32"}
    kernel = compile_sm90(_unpack_kernel, sig, {"HAS_LORA": has_lora, "BLOCK": BLOCK}, options={"num_warps": 4})
    assert kernel.asm["cubin"]
