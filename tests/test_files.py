"""graphbench.files.write_atomic: a write that fails leaves what was there before, whole."""

import os

import pytest

from graphbench import files


def test_a_write_replaces_the_file_whole(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")
    files.write_atomic(path, "new text")
    assert path.read_text() == "new text" and [p.name for p in tmp_path.iterdir()] == ["report.md"]
    files.write_atomic(path, b"\x89PNG")
    assert path.read_bytes() == b"\x89PNG"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    """A full disk: the flush fails; the old report stays as it was, nothing half-written."""
    path = tmp_path / "chart.png"
    path.write_bytes(b"old chart")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        files.write_atomic(path, b"new chart, half written")
    assert path.read_bytes() == b"old chart"
    assert sorted(os.listdir(tmp_path)) == ["chart.png"]
