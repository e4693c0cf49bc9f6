"""Interrupting a sweep loses nothing: kill it at random moments, --resume completes the grid."""

from __future__ import annotations

import json
import os
import re
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphbench.bench.sweep import sweep_lock
from graphbench.errors import GraphbenchError
from graphbench.reports.store import load_results

pytestmark = pytest.mark.slow
ARGS = ["sweep", "--device", "cpu", "--levels", "0", "--ladders", "default", "--grid", "max_num_seqs=4,8,16",
        "--concurrency", "1,2", "--prompt-len", "8", "--output-len", "4", "--repeats", "1", "--peers", "none",
        "--rounds", "3"]
ROOT = Path(__file__).resolve().parents[1]
LABELS = {"O0_default_max_num_seqs=4", "O0_default_max_num_seqs=8", "O0_default_max_num_seqs=16"}


def _sweep(results, *extra) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "graphbench", *ARGS, "--results", str(results), *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def test_kill_at_random_moments_then_resume(tmp_path):
    rng = random.Random(7)
    results = tmp_path / "results"
    for _ in range(3):
        proc = _sweep(results, "--resume")
        time.sleep(rng.uniform(1.5, 6.0))  # a point takes ~3-5 s on 2 cores: kills land in and between points
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its running point, mid-write or not
        proc.wait()
    final = _sweep(results, "--resume")
    assert final.wait(timeout=300) == 0
    loaded = load_results([results])
    assert not loaded.skipped  # no half-written result file (writes go to a hidden temp file, then a link)
    ok = [r["label"] for r in loaded.results if r["status"] == "ok"]
    assert set(ok) == LABELS and len(ok) == len(LABELS)  # every point once: none lost, none duplicated
    # ... and every point's processes (3 rounds) once each, all of one sweep
    for r in [r for r in loaded.results if r["status"] == "ok"]:
        assert sorted(x["index"] for x in r["rounds"]) == [1, 2, 3], (r["label"], r["rounds"])


def test_second_sweep_into_the_same_folder_is_refused(tmp_path):
    with sweep_lock(tmp_path):
        with pytest.raises(GraphbenchError, match=rf"another sweep \(pid {os.getpid()} on .*, since 20"):
            with sweep_lock(tmp_path):
                pass
    # what a dead sweep left (its lock file, a holder note) holds nothing: the OS lock died with it
    (tmp_path / ".sweep.lock").write_text("999999999")
    (tmp_path / ".sweep.holder").write_text("pid 999999999 on elsewhere\n")
    with sweep_lock(tmp_path):
        assert (tmp_path / ".sweep.holder").read_text().startswith(f"pid {os.getpid()} on ")
    assert not (tmp_path / ".sweep.holder").exists()


def test_racing_processes_never_hold_the_lock_twice(tmp_path):
    """8 processes x 20 trials start together: at most one holds the lock at any moment (50 trials, 2026-12-01:
    never two holders). The contenders are forked from a small process of their own (tests/lock_race.py),
    not from this one."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "lock_race.py"), str(tmp_path), "20", "8"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    held_per_trial = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(held_per_trial) == 20
    held_total = 0
    for trial, held in enumerate(held_per_trial):
        assert held, f"trial {trial}: nobody got the lock"
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(held, held[1:])), f"trial {trial}: {held}"
        held_total += len(held)
    assert held_total >= 20


def test_sigterm_stops_cleanly_with_a_report(tmp_path):
    """A CI time limit (SIGTERM): the running point is killed (no failed record), finished points get
    their summary and report, exit 128 + 15."""
    results, report = tmp_path / "results", tmp_path / "report"
    proc = subprocess.Popen([sys.executable, "-m", "graphbench", *ARGS, "--results", str(results),
                             "--report", str(report)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and not list(results.rglob("0001_*.json")):
        time.sleep(0.2)
    assert list(results.rglob("0001_*.json")), "the first point never finished"
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "interrupted" in output and "--resume" in output
    # the progress bar's last render (done/total, then the elapsed time) counts measured points only; the
    # summary's "busy host (1/1)" cells, where a loaded host flags a repeat, are not the bar's
    counts = re.findall(r"\b(\d+)/(\d+) +\d+:\d\d:\d\d\b", output)
    assert counts and int(counts[-1][0]) < int(counts[-1][1]), counts[-3:]
    loaded = load_results([results])
    assert loaded.results and all(r["status"] == "ok" for r in loaded.results)  # the killed point left no record
    first = {r["label"] for r in loaded.results}
    assert (report / "report.md").is_file() and all(label in (report / "report.md").read_text() for label in first)
    assert first < LABELS  # (--resume completing the grid is test_kill_at_random_moments_then_resume's)
