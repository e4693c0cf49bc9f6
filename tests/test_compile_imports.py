"""The compile stack is imported before compile/load timers start, and reported on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_compile_stack_imports_the_compiler_modules_once():
    code = (
        "import sys, json, torch\n"
        "from graphbench.runner.compile.compile_stack import COMPILE_STACK_MODULES, import_compile_stack\n"
        "before = [m for m in COMPILE_STACK_MODULES if m in sys.modules]\n"
        "first = import_compile_stack()\n"
        "after = [m for m in COMPILE_STACK_MODULES if m in sys.modules]\n"
        "print(json.dumps({'before': before, 'after': after, 'first': first}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert "torch._inductor.compile_fx" not in data["before"]  # `import torch` alone does not load them
    assert {"torch._dynamo", "torch._inductor.compile_fx", "torch._functorch.aot_autograd"} <= set(data["after"])
    assert data["first"] > 0


def test_startup_report_carries_the_import_seconds_apart_from_compile_seconds():
    from graphbench.runner.records import StartupReport

    report = StartupReport(dynamo_seconds=2.0, inductor_seconds=3.0, compile_import_seconds=4.0)
    assert report.compile_seconds == 5.0


def test_compile_workers_start_early(monkeypatch):
    """start_compile_workers starts Inductor's pool and submits its readiness probe (so workers import
    torch while Dynamo traces); with one compile thread: nothing."""
    import torch._inductor.config as inductor_config
    from torch._inductor.async_compile import AsyncCompile

    from graphbench.runner.compile.compiler import start_compile_workers

    calls = []
    monkeypatch.setattr(AsyncCompile, "warm_pool", classmethod(lambda cls: calls.append("warm_pool")))
    monkeypatch.setattr(AsyncCompile, "use_process_pool", classmethod(lambda cls: calls.append("probe") or False))
    # (Inductor's config is patched its own way: monkeypatch would delete compile_threads on undo)
    with inductor_config.patch(compile_threads=8):
        assert start_compile_workers() == 8 and calls == ["warm_pool", "probe"]
    calls.clear()
    with inductor_config.patch(compile_threads=1):
        assert start_compile_workers() == 1 and calls == []
    assert isinstance(inductor_config.compile_threads, int)  # left as it was


def test_the_tracing_step_fits_the_requests_contexts():
    from graphbench.runner.compile.startup import largest_step_tokens

    assert largest_step_tokens(8192, 1, 4096) == 4096  # llama-3.1-8b at batch 1 (benchmarks/decode.py)
    assert largest_step_tokens(8192, 256, 4096) == 8192
    assert largest_step_tokens(2048, 3, 512) == 1536


def _cold_then_warm(tmp_path: Path, overrides: str, printed: str) -> tuple[dict, dict]:
    """Two fresh processes on one new cache root, each starting an -O2 CPU engine with these extra
    overrides (Python dict items) and printing the JSON of `printed` (an expression over e and r = e.report)."""
    code = (
        "import sys, json\n"
        "from graphbench.config import load_engine_config\n"
        "from graphbench.runner.engine import Engine\n"
        "e = Engine(load_engine_config(overrides={'model.device': 'cpu', 'model.dtype': 'float32', "
        f"'optimization_level': 2, 'scheduler.max_num_seqs': 4, 'scheduler.max_num_batched_tokens': 64, {overrides}}}))\n"
        "r = e.report\n"
        f"print(json.dumps({printed}))\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "GRAPHBENCH_CACHE_ROOT": str(tmp_path / "cache"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return runs[0], runs[1]


def test_a_warm_start_of_traced_pieces_imports_no_compile_stack(tmp_path):
    """-O2 on one device without LoRA: every piece is graphbench's ops, so a warm start in a fresh process
    loads the saved split graph without importing Dynamo or Inductor (compile_stack.py); the cold start
    before it imported them, as it compiles."""
    cold, warm = _cold_then_warm(tmp_path, "", (
        "{'loaded': r.compile_loaded, 'imports': r.compile_import_seconds, "
        "'stack': [m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules], "
        "'tokens': e.generate([[1, 2, 3]])[0]}"))
    assert not cold["loaded"] and cold["imports"] > 0 and cold["stack"] == ["torch._dynamo", "torch._inductor"]
    assert warm["loaded"] and warm["imports"] == 0 and warm["stack"] == []
    assert warm["tokens"] == cold["tokens"]


def test_a_variant_compile_imports_the_compile_stack_outside_its_timer(monkeypatch):
    """A warm start of traced pieces with compile_sizes whose variants were not saved (the CPU's: "no
    aot_autograd artifacts") compiles them again: importing the compile stack for that is counted as
    import seconds (startup adds them to compile_import_seconds), not as compile_sizes time."""
    import time

    import torch
    import torch.fx as fx

    from graphbench.runner.compile import pieces
    from graphbench.runner.compile.splitting import SplittingBackend

    def slow_import() -> float:
        time.sleep(0.3)
        return 0.3

    monkeypatch.setattr(pieces, "import_compile_stack", slow_import)
    monkeypatch.setattr(pieces, "inductor_compile", lambda graph, args, patches, dynamic: (graph, None))
    backend = SplittingBackend([], [4], autotune=False, piecewise_graphs=False, artefact_dir=None)
    graph = fx.symbolic_trace(lambda x: x * 2 + 1)
    runner = pieces.PieceRunner("piece_0", graph, lambda x: x * 10, lambda args: args[0].shape[0], backend, key="k")
    four = torch.arange(4.0)
    assert torch.equal(runner(four), four * 2 + 1)  # the size-4 variant, compiled (here: the graph itself)
    assert backend.stats.num_static_variants == 1 and backend.stats.variant_import_seconds == 0.3
    assert backend.stats.static_inductor_seconds < 0.3  # the import is not compile_sizes time
