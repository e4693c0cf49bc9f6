"""Import one of the scripts under benchmarks/ as a module (they are not a package), for tests of their logic."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_bench_script(name: str) -> ModuleType:
    """benchmarks/<name>.py, executed as a fresh module named <name>_bench."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
