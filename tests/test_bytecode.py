"""graphbench keeps Python's bytecode under its cache root when the interpreter would not (bytecode.py)."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from graphbench import bytecode
from graphbench.bytecode import keep_bytecode


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    source = tmp_path / "pkg" / "probe_module.py"
    source.parent.mkdir()
    source.write_text("VALUE = 7\n")
    return source


@pytest.fixture
def no_bytecode(monkeypatch):
    """An interpreter that neither writes bytecode nor has a prefix (as under PYTHONDONTWRITEBYTECODE=1)."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)


def private_root(tmp_path: Path) -> Path:
    root = tmp_path / "cache-root"
    root.mkdir(mode=0o700)
    return root


def test_sets_the_prefix_when_nothing_is_kept(tmp_path, probe, no_bytecode):
    root = private_root(tmp_path)
    environ = {"PYTHONDONTWRITEBYTECODE": "1"}
    folder = keep_bytecode(root, environ, probe)
    assert folder == root / "bytecode"
    assert sys.pycache_prefix == str(root / "bytecode") and sys.dont_write_bytecode is False
    assert environ == {"PYTHONPYCACHEPREFIX": str(root / "bytecode")}
    assert (folder.stat().st_mode & 0o777) == 0o700


def test_leaves_an_interpreter_whose_bytecode_exists(tmp_path, probe, no_bytecode):
    py_compile.compile(str(probe), cfile=bytecode.importlib.util.cache_from_source(str(probe)))
    environ: dict[str, str] = {}
    assert keep_bytecode(private_root(tmp_path), environ, probe) is None
    assert sys.pycache_prefix is None and environ == {}


def test_leaves_an_interpreter_that_writes_bytecode(tmp_path, probe, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert keep_bytecode(private_root(tmp_path), {}, probe) is None


def test_a_read_only_site_packages_gets_the_prefix(tmp_path, probe, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(bytecode.os, "access", lambda path, mode: False)
    root = private_root(tmp_path)
    assert keep_bytecode(root, {}, probe) == root / "bytecode"


def test_a_root_others_can_write_is_not_used(tmp_path, probe, no_bytecode):
    root = private_root(tmp_path)
    root.chmod(0o777)
    assert keep_bytecode(root, {}, probe) is None
    assert sys.pycache_prefix is None and sys.dont_write_bytecode is True


def test_a_fresh_process_writes_then_reads_its_bytecode_under_the_root(tmp_path, probe):
    root = private_root(tmp_path)
    code = (f"import sys; sys.path.insert(0, {str(probe.parent)!r}); from pathlib import Path; "
            f"from graphbench.bytecode import keep_bytecode; "
            f"print(keep_bytecode(Path({str(root)!r}), probe=Path({str(probe)!r}))); import probe_module; "
            "print(probe_module.__cached__)")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPYCACHEPREFIX", None)
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    folder, cached = first.stdout.split()
    assert folder == str(root / "bytecode")
    assert cached.startswith(str(root / "bytecode")) and Path(cached).is_file()
    assert not (probe.parent / "__pycache__").exists()
    # the next start (same environment) uses the same folder and reads the bytecode the first wrote
    written = Path(cached).stat().st_mtime_ns
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert second.stdout.split() == [folder, cached]
    assert Path(cached).stat().st_mtime_ns == written
