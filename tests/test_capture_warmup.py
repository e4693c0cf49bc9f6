"""cudagraph.warmup_batches: which batches the capture runs eagerly before recording them."""

from __future__ import annotations


from graphbench.runner.cudagraph import warmup_batches

# (tokens, requests, uniform decode, adapters) in capture order: largest first, FULL decode then mixed
PLAN = [(256, 256, True, False), (128, 128, True, False), (64, 64, True, False), (32, 32, True, False),
        (17, 17, True, False), (16, 16, True, False), (8, 8, True, False), (2, 2, True, False), (1, 1, True, False),
        (256, 256, False, False), (72, 72, False, False), (64, 64, False, False), (16, 16, False, False),
        (1, 1, False, False), (64, 64, True, True), (8, 8, True, True), (64, 64, True, False)]


def test_the_warm_up_runs_the_first_batch_of_each_kernel_kind():
    # row classes 1 | 2..16 | 17..32 | 33..64 | > 64, uniform or not, adapters or not: the first of each
    assert warmup_batches(PLAN) == [
        (256, 256, True, False), (64, 64, True, False), (32, 32, True, False), (16, 16, True, False),
        (1, 1, True, False),
        (256, 256, False, False), (64, 64, False, False), (16, 16, False, False), (1, 1, False, False),
        (64, 64, True, True), (8, 8, True, True)]


def test_the_row_classes_follow_the_skinny_gemm():
    from graphbench.runner.kernel_choice import MAX_ROWS as CHOICE_MAX_ROWS, row_class
    from graphbench.runner.kernels.skinny_gemm import MAX_ROWS

    assert CHOICE_MAX_ROWS == MAX_ROWS == 64
    assert [row_class(r) for r in (1, 2, 16, 17, 32, 33, 64, 65)] == [1, 16, 16, 32, 32, 64, 64, None]
