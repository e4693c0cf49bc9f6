"""runner/blas_prewarm.py: which first cuBLAS calls the capture would make, and the thread that makes them."""

from __future__ import annotations

import logging

import torch

from graphbench.config import load_arch
from graphbench.runner.blas_prewarm import BlasPrewarm, cublas_calls
from graphbench.runner.loader import build_model


def _layer():
    arch = load_arch("tiny-llama")
    return arch, build_model(arch, 64, torch.float32, torch.device("cpu")).layers[0]


def test_each_distinct_projection_shape_at_each_size_smallest_first():
    arch, layer = _layer()
    calls = cublas_calls(layer, [72, 8, 72, 1])
    h, i = arch.hidden_size, arch.intermediate_size
    qkv = (arch.num_attention_heads + 2 * arch.num_key_value_heads) * arch.head_dim
    shapes = [(qkv, h), (h, arch.num_attention_heads * arch.head_dim), (2 * i, h), (h, i)]
    distinct = list(dict.fromkeys(shapes))  # (o and qkv may coincide on a tiny model)
    # on the CPU graphbench's kernels run no projection: every size is cuBLAS's (torch's) call
    assert [(rows, tuple(w.shape)) for rows, w in calls] == [(r, s) for r in (1, 8, 72) for s in distinct]


def test_the_thread_makes_the_calls_and_a_failure_is_only_logged(caplog):
    _, layer = _layer()
    prewarm = BlasPrewarm(cublas_calls(layer, [3, 5]), torch.device("cpu"))
    prewarm.join()
    assert prewarm.error is None and not prewarm.thread.is_alive()
    bad = BlasPrewarm([(2, torch.zeros(4, 3)), (2, torch.zeros(5, 7, 2))], torch.device("cpu"))  # a 3-d weight
    with caplog.at_level(logging.WARNING, logger="graphbench.capture"):
        bad.join()
    assert isinstance(bad.error, RuntimeError) and "cuBLAS pre-warm failed" in caplog.text
