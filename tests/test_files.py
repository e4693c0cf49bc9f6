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


@pytest.fixture
def umask():
    """Set the process's umask for one test and restore it after."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


def _mode(path) -> int:
    return os.stat(path).st_mode & 0o777


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_written_files_take_the_users_umask(tmp_path, umask, mask, expected):
    """Reports, charts, plans and results are shared files: the user's umask decides who reads them (they
    were 0600 whatever the umask, as tempfile.mkstemp makes its files)."""
    from graphbench.ladders.step_curve import StepCurve, write_curve
    from graphbench.reports.store import write_result

    umask(mask)
    written = [files.write_atomic(tmp_path / "report.md", "text"),
               write_result(tmp_path / "results", "cpu-host", "O2_default", {"ok": True}),
               write_curve(tmp_path / "curve.json", StepCurve({1: 1.0}, eager_ms={1: 2.0}, capture_s={1: 0.1}))]
    files.write_atomic(tmp_path / "report.md", "replaced")  # a replaced file too
    assert {path.name: _mode(path) for path in written} == {path.name: expected for path in written}


def test_reports_and_plans_through_the_cli_take_the_umask(tmp_path, umask):
    from typer.testing import CliRunner

    from graphbench.cli.main import app
    from tests.test_report import SYNTHETIC

    umask(0o022)
    runner = CliRunner()
    for args in (["report", SYNTHETIC, "-o", tmp_path / "report"],
                 ["plan", SYNTHETIC, "--slo", "tpot_p99_ms=50", "-o", tmp_path / "plan"]):
        result = runner.invoke(app, [str(a) for a in args])
        assert result.exit_code == 0, result.output
    modes = {str(p.relative_to(tmp_path)): _mode(p) for p in tmp_path.rglob("*") if p.is_file()}
    assert len(modes) >= 10 and set(modes.values()) == {0o644}, modes
