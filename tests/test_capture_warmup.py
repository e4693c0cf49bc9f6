"""What the capture does before its recordings: cudagraph.warmup_batches (which batches run eagerly first) and
engine_startup.pay_graph_setup (the capture stream's cuBLAS setup, counted alike in every start)."""

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


def test_a_start_that_captures_pays_the_first_cublas_capture_and_counts_it(monkeypatch):
    """engine_startup.pay_graph_setup: on a GPU with a cudagraph mode, before anything records, with the model's
    dtype and hidden size; capture_graphs counts it in the graph memory. Elsewhere nothing is paid."""
    from types import SimpleNamespace

    import torch

    from graphbench.config import CUDAGraphMode
    from graphbench.runner import engine_startup
    from graphbench.runner.cudagraph import CaptureReport
    from graphbench.runner.records import StartupReport

    calls = []
    monkeypatch.setattr(engine_startup, "pay_first_capture",
                        lambda stream, dtype, size: calls.append((stream, dtype, size)) or 72 * 2**20)
    embed = torch.empty(10, 48, dtype=torch.float16)

    def engine(device: str, mode: CUDAGraphMode):
        return SimpleNamespace(device=torch.device(device), dispatcher=SimpleNamespace(mode=mode),
                               model=SimpleNamespace(embed_tokens=SimpleNamespace(weight=embed)),
                               report=StartupReport(),
                               runner=SimpleNamespace(capture_stream=SimpleNamespace(device=torch.device(device))))

    for device, mode in (("cpu", CUDAGraphMode.FULL), ("cuda", CUDAGraphMode.NONE)):
        quiet = engine(device, mode)
        engine_startup.pay_graph_setup(quiet)
        assert quiet.report.graph_setup_bytes == 0
    assert calls == []
    gpu = engine("cuda", CUDAGraphMode.FULL_AND_PIECEWISE)
    engine_startup.pay_graph_setup(gpu)
    # on the stream the recordings will use (their cuBLAS workspace made here, outside their reading)
    assert calls == [(gpu.runner.capture_stream, torch.float16, 48)] and gpu.report.graph_setup_bytes == 72 * 2**20
    assert gpu.runner.capture_stream.device == torch.device("cuda")

    gpu.config = SimpleNamespace(compilation=SimpleNamespace(deferred_capture="never", startup_capture_sizes=None))
    gpu.runner.capture = lambda *args, **kwargs: CaptureReport(memory_bytes=284 * 2**20, pool_bytes=160 * 2**20)
    gpu.dispatcher.capture_list = lambda *args: []
    engine_startup.capture_graphs(gpu)
    assert gpu.report.graph_memory_bytes == (284 + 72) * 2**20 and gpu.report.graph_pool_bytes == 160 * 2**20
