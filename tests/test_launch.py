"""runner/kernels/launch.py: the launch key and the cached direct launch, with a stand-in for a Triton kernel."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from graphbench.runner.kernels import launch
from graphbench.runner.kernels.launch import DirectLauncher, make_key_function


def _kernel_fn(x_ptr, out_ptr, n, eps, BLOCK, PDL=False):  # the signature of a jitted kernel
    pass


class FakeCompiled:
    def __init__(self):
        self.function, self.packed_metadata, self.launches = "fn", "meta", []

    def run(self, *launch_args):
        self.launches.append(launch_args)


class FakeKernel:
    """kernel[grid](*args, **meta) -> the compiled kernel, as Triton's JIT path returns it."""

    fn = staticmethod(_kernel_fn)
    params = [SimpleNamespace(is_constexpr=c) for c in (False, False, False, False, True, True)]

    def __init__(self):
        self.jit_calls, self.compiled = [], {}

    def __getitem__(self, grid):
        def run(*args, **meta):
            self.jit_calls.append((grid, args, meta))
            return self.compiled.setdefault(len(self.compiled), FakeCompiled())
        return run


@pytest.fixture
def direct(monkeypatch):
    monkeypatch.setattr(launch, "_direct", True)
    monkeypatch.setattr(launch, "_current_stream", lambda index: 1000 + index)
    monkeypatch.setattr(launch, "_current_device", lambda: 0)
    # a CUDA tensor's only property the launcher reads beyond dtype and data_ptr
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)


def test_keys_hold_what_triton_specialises_on():
    t = torch.zeros(8)
    constexpr = [False, False, True]
    key = make_key_function((t, 64, 128), {"num_warps": 4}, constexpr)

    def k(a0=t, a1=64, a2=128, **meta):
        return key((a0, a1, a2), meta or {"num_warps": 4})

    assert k() == k(torch.ones(8), 96)  # same dtype, alignment, int class; new values: the same key
    assert k(t[1:]) != k() and k(torch.zeros(8, dtype=torch.float16)) != k()  # alignment, dtype
    assert len({k(a1=a) for a in (64, 1, 65, 2**31, 2**63, True)}) == 6  # % 16, == 1, width, a bool
    assert k(a2=256) != k() and k(a2=True) != k(a2=1)  # a constexpr by value and type
    assert k(num_warps=8) != k() and k(num_warps=4.0) != k()
    assert make_key_function((t, [1]), {}, [False, False]) is None  # an argument of no keyed kind
    floats = make_key_function((0.0,), {}, [True])
    assert floats((0.0,), {}) != floats((-0.0,), {})  # different constexprs in Triton
    nones = make_key_function((None,), {}, [False])
    with pytest.raises(Exception):
        nones((t,), {})  # a tensor where the first launch had None: no key (JIT path)


def test_second_launch_with_the_same_key_is_direct_with_the_tail_in_signature_order(direct):
    kernel = FakeKernel()
    launcher = DirectLauncher(kernel)
    x, out = torch.zeros(64), torch.zeros(64)
    launcher[(4,)](x, out, 64, 1e-5, BLOCK=128, num_warps=4)
    assert len(kernel.jit_calls) == 1 and launcher.num_direct == 0
    launcher[(5, 2)](x, out, 64, 1e-6, BLOCK=128, num_warps=4)  # another grid and float: the same key
    assert len(kernel.jit_calls) == 1 and launcher.num_direct == 1
    (args,) = kernel.compiled[0].launches
    # grid, stream, function, metadata, no hooks, positional args, then BLOCK and PDL's default
    assert args == (5, 2, 1, 1000, "fn", "meta", None, None, None, x, out, 64, 1e-6, 128, False)


@pytest.mark.parametrize("change", ["int class", "constexpr", "option", "alignment", "dtype", "bool for int",
                                    "device"])
def test_a_different_specialisation_goes_through_the_jit_path(direct, change):
    kernel = FakeKernel()
    launcher = DirectLauncher(kernel)
    x, out = torch.zeros(64), torch.zeros(64)
    launcher[(4,)](x, out, 64, 1e-5, BLOCK=128, num_warps=4)
    args, meta = [x, out, 64, 1e-5], dict(BLOCK=128, num_warps=4)
    if change == "int class":
        args[2] = 65  # no longer divisible by 16
    elif change == "constexpr":
        meta["BLOCK"] = 256
    elif change == "option":
        meta["num_warps"] = 8
    elif change == "alignment":
        args[0] = x[1:]  # 4 bytes off the 16-byte alignment
    elif change == "bool for int":
        meta["PDL"] = 1  # Triton compiles PDL=1 and PDL=True apart
        launcher[(4,)](*args, **dict(meta, PDL=True))
        kernel.jit_calls.pop()
    elif change == "device":
        launch._current_device = lambda: 1  # (the fixture's monkeypatch restores it)
    else:
        args[0] = torch.zeros(64, dtype=torch.float16)
    launcher[(4,)](*args, **meta)
    assert len(kernel.jit_calls) == 2 and launcher.num_direct == 0


def test_the_jit_path_is_kept_when_off_interpreted_or_unkeyable(direct, monkeypatch):
    x, out = torch.zeros(64), torch.zeros(64)
    kernel = FakeKernel()
    launcher = DirectLauncher(kernel)
    for _ in range(2):  # a tensor passed by keyword would be keyed by identity: never cached
        launcher[(1,)](x, out, 64, 1e-5, BLOCK=128, PDL=torch.zeros(1))
    assert len(kernel.jit_calls) == 2 and launcher.num_direct == 0
    monkeypatch.setattr(launch, "_direct", None)  # as before the process's first launch
    monkeypatch.setenv("GRAPHBENCH_DIRECT_LAUNCH", "0")
    for _ in range(2):
        launcher[(1,)](x, out, 64, 1e-5, BLOCK=128)
    assert launch._direct is False  # read at the first launch, then kept
    monkeypatch.setattr(launch, "_direct", True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for _ in range(2):
        launcher[(1,)](x, out, 64, 1e-5, BLOCK=128)
    assert len(kernel.jit_calls) == 6 and launcher.num_direct == 0


def test_a_callable_grid_or_a_kernel_without_a_parameter_list_stays_on_the_jit_path(direct):
    x = torch.zeros(64)
    kernel = FakeKernel()
    launcher = DirectLauncher(kernel)
    for _ in range(2):
        launcher[lambda meta: (1,)](x, x, 64, 1e-5, BLOCK=128)
    bare = FakeKernel()
    bare.params = None  # e.g. an autotuner wrapper: which parameters are constexpr is unknown
    bare_launcher = DirectLauncher(bare)
    for _ in range(2):
        bare_launcher[(1,)](x, x, 64, 1e-5, BLOCK=128)
    assert len(kernel.jit_calls) == len(bare.jit_calls) == 2
    assert launcher.num_direct == bare_launcher.num_direct == 0


def test_a_launch_that_returns_no_compiled_kernel_stays_on_the_jit_path(direct):
    kernel = FakeKernel()
    kernel.__class__ = type("OldTriton", (FakeKernel,), {"__getitem__": lambda self, grid: (
        lambda *args, **meta: self.jit_calls.append(args))})
    launcher = DirectLauncher(kernel)
    x = torch.zeros(64)
    for _ in range(3):
        launcher[(1,)](x, x, 64, 1e-5, BLOCK=128)
    assert len(kernel.jit_calls) == 3 and launcher.num_direct == 0


def test_a_real_kernel_signature_is_read_with_its_constexprs():
    pytest.importorskip("triton")
    from graphbench.runner.kernels.add_rmsnorm import _add_rmsnorm_kernel

    launcher = DirectLauncher(_add_rmsnorm_kernel)
    assert launcher.names == ["x_ptr", "r_ptr", "nw_ptr", "out_ptr", "h_ptr", "K", "stride_x", "stride_r", "eps",
                              "BLOCK", "PDL"]
    assert launcher.constexpr == [False] * 9 + [True, True]
    assert launcher.defaults[-1] is False


def test_listed_launches_are_not_made_and_compile_ahead_once_per_key(direct, monkeypatch, caplog):
    """list_launches (runner/kernel_bench.precompile's pass): launches are listed, not made, one per launch
    key, and a repeated key's arguments are not held (a pass over every captured size held every size's
    activations); precompile compiles those (compile_only: Triton's warmup) and nothing else."""
    import gc
    import weakref

    from graphbench.runner import kernel_bench

    kernel = FakeKernel()
    warmed = []
    kernel.warmup = lambda *args, grid, **meta: warmed.append((grid, args, meta))
    launcher = DirectLauncher(kernel)
    x, out = torch.zeros(8), torch.zeros(8)
    with launch.list_launches() as listed:
        launcher[(4,)](x, out, 8, 1e-6, BLOCK=64)
        repeated = torch.ones(8)
        launcher[(4,)](repeated, out, 8, 2e-6, BLOCK=64)  # the same key: other values
        held = weakref.ref(repeated)
        del repeated
        gc.collect()
        assert held() is None  # not kept by the listing
        launcher[(2,)](x, out, 8, 1e-6, BLOCK=128)  # another constexpr: another key
    assert kernel.jit_calls == [] and launcher.num_direct == 0  # nothing launched
    assert [(g, m["BLOCK"]) for _, g, _, m in listed] == [((4,), 64), ((2,), 128)]
    monkeypatch.setattr(kernel_bench, "compile_all", lambda calls: [call() for call in calls])
    with launch.compile_only():  # (compile_all's own context, which the stand-in above leaves out)
        count = kernel_bench.precompile(lambda: (launcher[(4,)](x, out, 8, 1e-6, BLOCK=64),
                                                 launcher[(4,)](x, out, 9, 1e-6, BLOCK=64)))
    assert count == 1 and [(g, m["BLOCK"]) for g, _, m in warmed] == [((4,), 64)] and kernel.jit_calls == []
    # a pass that fails compiles nothing, and the start goes on, saying so
    with caplog.at_level("WARNING", logger="graphbench.engine"):
        assert kernel_bench.precompile(lambda: 1 / 0) == 0 and len(warmed) == 1
    assert "ahead failed" in caplog.text and "ZeroDivisionError" in caplog.text


def test_a_candidate_out_of_memory_is_skipped_aloud(monkeypatch, caplog):
    """A candidate that does not compile is skipped quietly (its shape's property); one that ran out of device
    memory is skipped with a warning (the start-up's memory, not the candidate, decided it)."""
    from graphbench.runner import kernel_bench

    timer = kernel_bench.ProjectionTimer(torch.zeros(4, 8), None)

    def failing(error):
        def graph_time_us(*args, **kwargs):
            raise error
        return graph_time_us

    with caplog.at_level("DEBUG", logger="graphbench.engine"):
        monkeypatch.setattr(kernel_bench, "graph_time_us", failing(RuntimeError("out of resources: shared memory")))
        assert timer.time_run(lambda w: w, "skinny (64,)") is None
        monkeypatch.setattr(kernel_bench, "graph_time_us", failing(torch.OutOfMemoryError("CUDA out of memory")))
        assert timer.time_run(lambda w: w, "skinny (128,)") is None
    levels = {r.getMessage().split(" for ")[0]: r.levelname for r in caplog.records}
    assert levels == {"kernel candidate skinny (64,)": "DEBUG", "kernel candidate skinny (128,)": "WARNING"}
