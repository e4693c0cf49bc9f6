"""CUDAGraphWrapper's replay path without a GPU: a stand-in graph, the input-address check."""

import pytest
import torch

from graphbench.config.modes import CUDAGraphMode
from graphbench.runner import cudagraph
from graphbench.runner.cudagraph import CUDAGraphWrapper, _Recording, graph_runtime
from graphbench.runner.scheduler import BatchDescriptor


class _FakeGraph:
    def __init__(self):
        self.num_replays = 0

    def replay(self):
        self.num_replays += 1


def _wrapper_with_recording(key, inputs):
    wrapper = CUDAGraphWrapper(lambda *args: pytest.fail("replays must not run the callable"),
                               CUDAGraphMode.PIECEWISE, "piece")
    graph = _FakeGraph()
    wrapper.recordings[key] = _Recording(graph, "recorded output", cudagraph._addresses(inputs))
    return wrapper, graph


def test_moved_inputs_are_caught_on_the_first_replays_then_trusted(monkeypatch):
    key = BatchDescriptor(8, None)
    x, y = torch.zeros(8), torch.zeros(8)
    wrapper, graph = _wrapper_with_recording(key, (x, 3, y))
    moved = torch.zeros(8)
    with graph_runtime(CUDAGraphMode.PIECEWISE, key):
        with pytest.raises(RuntimeError, match="inputs moved"):
            wrapper(x, 3, moved)
        for _ in range(cudagraph.NUM_CHECKED_REPLAYS):
            assert wrapper(x, 3, y) == "recorded output"
        assert wrapper(x, 3, moved) == "recorded output"  # past the checked replays: not read any more
        monkeypatch.setenv("GRAPHBENCH_CHECK_GRAPH_INPUTS", "1")  # read when a wrapper is made
        wrapper.check_all_replays = _wrapper_with_recording(key, (x, 3, y))[0].check_all_replays
        with pytest.raises(RuntimeError, match="inputs moved"):
            wrapper(x, 3, moved)
    assert graph.num_replays == cudagraph.NUM_CHECKED_REPLAYS + 1


def test_other_modes_call_through_and_unrecorded_keys_are_a_dispatcher_bug():
    key = BatchDescriptor(8, None)
    calls = []
    wrapper = CUDAGraphWrapper(lambda *args: calls.append(args) or "eager", CUDAGraphMode.PIECEWISE, "piece")
    with graph_runtime(CUDAGraphMode.NONE, None):
        assert wrapper(1, 2) == "eager" and calls == [(1, 2)]
    with graph_runtime(CUDAGraphMode.PIECEWISE, key), pytest.raises(RuntimeError, match="dispatcher bug"):
        wrapper(1, 2)
