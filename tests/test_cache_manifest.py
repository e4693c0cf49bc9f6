"""The compile-cache entry's signed manifest (runner/compile/cache_trust.py) on a plain folder: re-signing
after a warm start hashes only what changed, and a digest kept that way cannot bless an altered file."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from graphbench.runner.compile import cache_trust
from graphbench.runner.compile.cache_trust import MANIFEST, admit_entry, write_manifest

KEY = b"k" * 32


@pytest.fixture
def entry(tmp_path):
    (tmp_path / "triton").mkdir()
    (tmp_path / "split_graph.pkl").write_bytes(b"graph")
    (tmp_path / "triton" / "kernel.cubin").write_bytes(b"cubin-v1")
    write_manifest(tmp_path, KEY)
    # files and manifest an hour in the past: what a start finds, with mtimes the clock's tick cannot blur
    hour_ago = os.stat(tmp_path / MANIFEST).st_mtime_ns - 3600 * 10**9
    for path in [tmp_path / "split_graph.pkl", tmp_path / "triton" / "kernel.cubin"]:
        os.utime(path, ns=(hour_ago, hour_ago))
    os.utime(tmp_path / MANIFEST, ns=(hour_ago + 10**9, hour_ago + 10**9))
    return tmp_path


def _digests(monkeypatch) -> list[str]:
    hashed = []
    real = cache_trust._digest

    def spy(path):
        hashed.append(path.name)
        return real(path)

    monkeypatch.setattr(cache_trust, "_digest", spy)
    return hashed


def test_resigning_an_unchanged_entry_hashes_and_writes_nothing(entry, monkeypatch):
    hashed = _digests(monkeypatch)
    before = (entry / MANIFEST).stat().st_mtime_ns
    write_manifest(entry, KEY)
    assert hashed == [] and (entry / MANIFEST).stat().st_mtime_ns == before
    assert admit_entry(entry, KEY) is None


def test_resigning_hashes_only_new_and_rewritten_files(entry, monkeypatch):
    hashed = _digests(monkeypatch)
    (entry / "triton" / "kernel.cubin").write_bytes(b"cubin-v2")  # same size, written after the manifest
    (entry / "triton" / "other.cubin").write_bytes(b"new kernel")
    write_manifest(entry, KEY)
    assert sorted(hashed) == ["kernel.cubin", "other.cubin"]
    files = json.loads((entry / MANIFEST).read_text())["files"]
    assert files["triton/kernel.cubin"] == [8, hashlib.sha256(b"cubin-v2").hexdigest()]
    assert files["split_graph.pkl"] == [5, hashlib.sha256(b"graph").hexdigest()]
    assert admit_entry(entry, KEY) is None


def test_a_kept_digest_does_not_bless_a_file_altered_with_its_mtime_reset(entry):
    cubin = entry / "triton" / "kernel.cubin"
    stamp = cubin.stat().st_mtime_ns
    cubin.write_bytes(b"planted!")  # same size
    os.utime(cubin, ns=(stamp, stamp))
    write_manifest(entry, KEY)  # keeps the old digest: the mtime says unchanged
    assert admit_entry(entry, KEY) == "triton/kernel.cubin is corrupt or truncated"


def test_a_manifest_signed_with_another_key_is_not_reused(entry, monkeypatch):
    hashed = _digests(monkeypatch)
    write_manifest(entry, b"x" * 32)
    assert sorted(hashed) == ["kernel.cubin", "split_graph.pkl"]
    assert admit_entry(entry, b"x" * 32) is None and admit_entry(entry, KEY).startswith("manifest not signed")
