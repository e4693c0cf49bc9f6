"""benchmarks/roofline.py's layer parts: each of graphbench's kernels of a decode step lands in its part (the
projections by their order in the layer), and a saved run's tables come back from its kernels."""

from __future__ import annotations

import json

from tests.bench_scripts import load_bench_script


def _roofline():
    return load_bench_script("roofline")


# one layer of a batch-64 step as the engine launches it (the gate/up GEMM with its activation is
# `_gated_kernel`), then the final norm, lm_head and the argmax
LAYER = ["_add_rmsnorm_kernel", "_skinny_kernel", "_decode_kernel", "_skinny_kernel", "_add_rmsnorm_kernel",
         "_gated_kernel", "_skinny_kernel"]
TAIL = ["_add_rmsnorm_kernel", "_skinny_kernel", "_chunk_argmax_kernel", "_row_argmax_kernel"]


def test_every_projection_kernel_lands_in_its_part():
    roofline = _roofline()
    from graphbench.config import load_arch

    arch = load_arch("llama-3.2-1b")
    kernels = [{"name": n, "us": 1.0} for n in ["_unpack_kernel", *LAYER * 2, *TAIL]]
    parts = [k["part"] for k in roofline.classify(kernels, arch, batch=64, context=128)]
    assert parts == ["other",
                     *["norms", "qkv", "attention", "o", "norms", "gate/up", "down"] * 2,
                     "norms", "lm_head", "sampling", "sampling"]
    classified = roofline.classify(kernels, arch, batch=64, context=128)
    assert roofline.kernels_per_layer(classified, 2) == 7  # two layers of seven, the final norm apart
    # the one-row forms: the GEMV and the gate/up GEMV with its activation
    assert roofline.part_of("_gemv_kernel") == roofline.part_of("_gated_gemv_kernel") == "projection"


def test_a_lora_layers_own_launches_are_a_part_of_their_own():
    # a layer with adapters at 16 rows (runner/lora/projection.py): the add-norms shrink qkv's and gate/up's input
    # in their launch (norms), o's and down's inputs are shrunk by launches of their own, the expands are in the
    # projections' epilogues; the shrink and expand launches of rows the epilogue does not cover are LoRA's too
    roofline = _roofline()
    from graphbench.config import load_arch

    layer = ["_add_rmsnorm_shrink_kernel", "_skinny_kernel", "_decode_kernel", "_row_shrink_kernel", "_skinny_kernel",
             "_add_rmsnorm_shrink_kernel", "_gated_kernel", "_row_shrink_kernel", "_skinny_kernel"]
    kernels = [{"name": n, "us": 1.0} for n in [*layer * 2, *TAIL, "_expand_kernel", "_shrink_kernel"]]
    classified = roofline.classify(kernels, load_arch("llama-3.2-1b"), batch=16, context=128)
    assert [k["part"] for k in classified] == [
        *["norms", "qkv", "attention", "lora", "o", "norms", "gate/up", "lora", "down"] * 2,
        "norms", "lm_head", "sampling", "sampling", "lora", "lora"]
    assert roofline.kernels_per_layer(classified[:-2], 2) == 9


def test_a_saved_run_is_summed_again_from_its_kernels(tmp_path):
    roofline = _roofline()
    kernels = [{"name": n, "part": "other", "us": 2.0, "bytes": None} for n in LAYER + TAIL]
    saved = {"model": "llama-3.2-1b", "level": 2, "copy_gbs": 4000.0, "context": 128,
             "results": [{"batch": 64, "kernels_per_step": len(kernels), "kernel_us": 22.0, "launch_gaps_us": 3.0,
                          "parts": [], "kernels": kernels, "step_us_unprofiled": 30.0}]}
    again = roofline.reclassify(json.loads(json.dumps(saved)))["results"][0]
    rows = {row["part"]: row for row in again["parts"]}
    assert {p: rows[p]["kernels"] for p in rows} == {"norms": 3, "qkv": 1, "attention": 1, "o": 1, "gate/up": 1,
                                                      "down": 1, "lm_head": 1, "sampling": 2}
    assert rows["gate/up"]["us"] == 2.0 and rows["norms"]["us"] == 6.0
    # gate/up at 64 rows: the [2 x 8192, 2048] weights and 64 rows in and out, in bf16
    assert rows["gate/up"]["bytes"] == (2048 * 16384 + 64 * (2048 + 16384)) * 2
    assert rows["gate/up"]["floor_us"] == rows["gate/up"]["bytes"] / 4e6
