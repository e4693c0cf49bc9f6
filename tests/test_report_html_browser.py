"""report.html in headless Chromium: the page renders and the embedded charts show.

Skipped only when no chromium binary exists (Debian: `apt-get install -y chromium`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from graphbench.reports.figures import PNG_SIGNATURE
from graphbench.reports.report import write_report
from tests.test_report import SYNTHETIC

WIDTH, HEIGHT = 1400, 3000


def chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def screenshot(browser: str, page: Path, shot: Path, profile: Path) -> None:
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
        "--hide-scrollbars", page.resolve().as_uri(),
    ]  # fmt: skip
    env = dict(os.environ, HOME=str(profile))
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, env=env,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]


def colourful_pixels(image) -> int:
    """Pixels with clearly saturated colour: chart lines and bars, not text, borders or table shading."""
    rgb = image[..., :3]
    return int(((rgb.max(axis=-1) - rgb.min(axis=-1)) > 0.25).sum())


@pytest.mark.skipif(chromium() is None, reason="no chromium binary (apt-get install -y chromium)")
def test_report_html_renders_the_charts(tmp_path):
    import matplotlib.image

    out = tmp_path / "report"
    report = write_report([SYNTHETIC], out)
    assert sum(c.written for c in report.charts) == 6
    page = out / "report.html"
    # the page must not need its neighbours: render a copy alone in an empty folder
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(page, alone / "report.html")

    shot = tmp_path / "shot.png"
    screenshot(chromium(), alone / "report.html", shot, tmp_path / "profile")
    assert shot.read_bytes()[:8] == PNG_SIGNATURE and shot.stat().st_size > 100_000
    image = matplotlib.image.imread(shot)
    assert image.shape[:2] == (HEIGHT, WIDTH)
    charts = image[700:, :]  # below the title and headline table: the first charts
    assert charts.std() > 0.1, "the chart region is blank"
    assert colourful_pixels(charts) > 50_000, "no chart colours in the rendered page"

    # the same page without its images has (almost) no colour there: the colour comes from the charts
    text = (alone / "report.html").read_text()
    stripped = alone / "no-images.html"
    stripped.write_text(text.replace('src="data:image/png;base64,', 'data-x="'))
    bare = tmp_path / "bare.png"
    screenshot(chromium(), stripped, bare, tmp_path / "profile2")
    assert colourful_pixels(matplotlib.image.imread(bare)[700:, :]) < 5_000
