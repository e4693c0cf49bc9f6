"""Triton's compiler key kept across processes (runner/kernels/triton_key.py): read back, recomputed when
Triton's files change or the kept file is damaged, never with the switch off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

triton_cache = pytest.importorskip("triton.runtime.cache")
import triton  # noqa: E402

from graphbench.runner.kernels import triton_key  # noqa: E402


@pytest.fixture
def computed(monkeypatch):
    """Triton's triton_key replaced by a counting stand-in (the real one hashes ~500 MB); restored after."""
    calls = []

    def compute() -> str:
        calls.append(1)
        return f"{triton.__version__}-key-{len(calls)}"

    monkeypatch.setattr(triton_cache, "triton_key", compute)
    monkeypatch.delenv("GRAPHBENCH_TRITON_KEY_CACHE", raising=False)
    return calls, compute


def test_the_key_is_computed_once_then_read_back(tmp_path, computed, monkeypatch):
    calls, compute = computed
    assert triton_key.remember_triton_key(tmp_path) == "computed"
    assert calls == [1] and triton_cache.triton_key() == f"{triton.__version__}-key-1"
    [kept] = tmp_path.glob("*.key")
    assert kept.read_text() == f"{triton.__version__}-key-1"
    monkeypatch.setattr(triton_cache, "triton_key", compute)  # a new process: Triton's own function again
    assert triton_key.remember_triton_key(tmp_path) == "kept"
    assert calls == [1] and triton_cache.triton_key() == f"{triton.__version__}-key-1"
    # Triton's cache lookup uses the module's triton_key: the kept value is in every kernel's cache key
    assert triton_cache.get_cache_key.__globals__["triton_key"]() == f"{triton.__version__}-key-1"


@pytest.mark.parametrize("damage", ["", "not a triton key", b"\xff\xfe"])
def test_a_damaged_or_foreign_file_is_recomputed_and_rewritten(tmp_path, computed, damage, monkeypatch):
    calls, compute = computed
    triton_key.remember_triton_key(tmp_path)
    [kept] = tmp_path.glob("*.key")
    kept.write_bytes(damage if isinstance(damage, bytes) else damage.encode())
    monkeypatch.setattr(triton_cache, "triton_key", compute)  # a new process
    assert triton_key.remember_triton_key(tmp_path) == "computed" and calls == [1, 1]
    assert kept.read_text() == f"{triton.__version__}-key-2"


def test_the_switch_off_leaves_triton_alone(tmp_path, computed, monkeypatch):
    calls, compute = computed
    monkeypatch.setenv("GRAPHBENCH_TRITON_KEY_CACHE", "0")
    assert triton_key.remember_triton_key(tmp_path) is None
    assert triton_cache.triton_key is compute and calls == [] and not list(tmp_path.iterdir())


def test_an_unwritable_folder_still_gives_the_key(tmp_path, computed):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert triton_key.remember_triton_key(blocker / "sub") == "computed"
    assert triton_cache.triton_key() == f"{triton.__version__}-key-1"


def test_the_identity_follows_the_hashed_files(tmp_path):
    root = tmp_path / "triton"
    for rel in ("compiler/compiler.py", "backends/nvidia/driver.py", "language/core.py", "runtime/cache.py",
                "_C/libtriton.so", "backends/nvidia/bin/ptxas", "tools/other.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    first = triton_key.triton_files_identity(root)
    assert triton_key.triton_files_identity(root) == first
    for rel in ("backends/nvidia/bin/ptxas", "tools/other.py"):  # not what triton_key hashes
        os.utime(root / rel, ns=(1, 1))
    assert triton_key.triton_files_identity(root) == first
    changed = set()
    for rel in ("compiler/compiler.py", "language/core.py", "runtime/cache.py", "_C/libtriton.so"):
        os.utime(root / rel, ns=(2, 2))
        changed.add(triton_key.triton_files_identity(root))
    assert len(changed) == 4 and first not in changed
    (root / "language" / "new.py").write_text("")
    assert triton_key.triton_files_identity(root) not in changed | {first}


def test_the_real_triton_files_have_an_identity():
    root = Path(triton_cache.__file__).resolve().parents[1]
    assert len(triton_key.triton_files_identity(root)) == 64


def test_the_kept_key_is_the_real_one(tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPHBENCH_TRITON_KEY_CACHE", raising=False)
    original = triton_cache.triton_key
    monkeypatch.setattr(triton_cache, "triton_key", original)  # restored after the test
    assert triton_key.remember_triton_key(tmp_path) == "computed"
    real = original()
    assert triton_cache.triton_key() == real and real.startswith(triton.__version__)
    monkeypatch.setattr(triton_cache, "triton_key", original)
    assert triton_key.remember_triton_key(tmp_path) == "kept" and triton_cache.triton_key() == real
