"""The start-up phases `graphbench generate` shows, from the engine's log records (runner/generate.py)."""

from __future__ import annotations

import inspect
import logging
from pathlib import Path

from graphbench.config import load_engine_config
from graphbench.runner.generate import ENGINE_LOG, StartupPhases, mode_note, startup_phases


class Keep(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_compile_phase_says_first_start_or_cache(tmp_path: Path) -> None:
    from graphbench.runner.compile.cache import COMPLETE_MARKER

    phases: list[str] = []
    config = load_engine_config(overrides={"model.device": "cpu", "optimization_level": 2})
    log = logging.getLogger(ENGINE_LOG)
    before = (list(log.handlers), log.level, log.propagate)
    with startup_phases(config, phases.append):
        log.warning("cudagraph mode %s -> %s: %s", "FULL_AND_PIECEWISE", "NONE", "CUDA graphs need a CUDA device")
        log.info("Using cache directory: %s for torch.compile", tmp_path)
        (tmp_path / COMPLETE_MARKER).write_text("ok\n")
        log.info("Using cache directory: %s for torch.compile", tmp_path)
        log.info("torch.compile took %.2f s (Dynamo %.2f s, Inductor %.2f s%s)", 1.0, 0.5, 0.5, "")
    assert phases == ["loading weights, sizing the KV cache",
                      "compiling (torch.compile, first start of this config)",
                      "loading the compiled forward (torch.compile cache)"]  # no graphs on the CPU: no capture
    assert (list(log.handlers), log.level, log.propagate) == before  # the logger as it was


def test_capture_follows_compile_and_only_records_shown_before_are_forwarded() -> None:
    phases: list[str] = []
    parent, keep = logging.getLogger("test-generate-phases"), Keep()
    parent.addHandler(keep)
    handler = StartupPhases(phases.append, graphs=True, passes=logging.WARNING, parent=parent)
    log = logging.getLogger("test-generate-phases.engine")
    log.propagate, log.level = False, logging.INFO
    log.addHandler(handler)
    try:
        log.info("torch.compile: loaded the compiled forward from %s in %.2f s (no Dynamo, no Inductor)", "d", 0.1)
        log.warning("cudagraph mode %s -> %s: %s", "FULL", "FULL_DECODE_ONLY", "backend cannot record mixed batches")
        log.info("torch.compile took %.2f s (Dynamo %.2f s, Inductor %.2f s%s)", 1.0, 0.5, 0.5, "")
        log.warning("cudagraph mode %s -> %s: %s", "FULL", "NONE", "why")
        log.info("torch.compile took %.2f s (Dynamo %.2f s, Inductor %.2f s%s)", 1.0, 0.5, 0.5, "")
    finally:
        log.removeHandler(handler)
    assert phases == ["capturing CUDA graphs", "capturing CUDA graphs"]  # not after the downgrade to NONE
    assert [r.getMessage() for r in keep.records] == [
        "cudagraph mode FULL -> FULL_DECODE_ONLY: backend cannot record mixed batches", "cudagraph mode FULL -> NONE: why"]


def test_the_engine_still_logs_the_records_the_phases_follow() -> None:
    """The engine has no progress hook: these log calls are what the phases follow."""
    from graphbench.runner import engine, engine_startup
    from graphbench.runner.compile import startup

    source = inspect.getsource(startup) + inspect.getsource(engine_startup)
    for message in ('"Using cache directory: %s for torch.compile", directory',
                    '"torch.compile: loaded the compiled forward', '"torch.compile took',
                    '"cudagraph mode %s -> %s: %s", resolution.requested.value, resolution.resolved.value'):
        assert message in source, message
    assert engine.log.name == engine_startup.log.name == startup.log.name == ENGINE_LOG


def test_mode_note() -> None:
    assert mode_note({"requested": "FULL", "resolved": "FULL", "reason": ""}) == ""
    assert mode_note({"requested": "FULL", "resolved": "PIECEWISE", "reason": "r"}) == (
        "cudagraph mode: requested FULL, resolved PIECEWISE: r")
