"""Chart axes read as numbers: log axes label plain values (never 3x10^0), concurrency ticks sit on the
measured values."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from graphbench.reports.figures import log2_axis, new_figure, plain_log_axis  # noqa: E402


def _labels(axis) -> list[str]:
    axis.figure.canvas.draw()
    low, high = sorted(axis.get_view_interval())
    return [t.get_text() for t in axis.get_ticklabels() if low <= t.get_position()[axis is axis.axes.yaxis] <= high]


@pytest.mark.parametrize("values, expect", [((1.6, 13.0), {"2", "3", "5", "7", "10"}), ((0.8, 60.0), {"1", "2", "5", "10", "20", "50"}),
                                            ((0.01, 5000.0), {"0.01", "1", "100", "1000"})])
def test_a_log_axis_labels_plain_numbers_at_every_span(values, expect):
    fig, ax = new_figure()
    ax.plot([1, 2], values)
    plain_log_axis(ax, "y")
    labels = [label for label in _labels(ax.yaxis) if label]
    assert expect <= set(labels), labels
    assert not any("10^" in label or "times" in label for label in labels)
    assert not any(t.get_text() for t in ax.yaxis.get_minorticklabels())


def test_concurrency_ticks_sit_on_the_measured_values():
    fig, ax = new_figure()
    ax.plot([1, 3, 12], [5, 6, 7])
    log2_axis(ax, at=[1, 3, 12, 3])
    assert [label for label in _labels(ax.xaxis) if label] == ["1", "3", "12"]


def test_too_many_measured_values_fall_back_to_powers_of_two():
    fig, ax = new_figure()
    values = list(range(1, 40, 2))
    ax.plot(values, values)
    log2_axis(ax, at=values)
    labels = [label for label in _labels(ax.xaxis) if label]
    assert labels and all(int(label) & (int(label) - 1) == 0 for label in labels)


def test_matplotlib_warnings_do_not_reach_the_user(tmp_path):
    # a log axis over no positive value (a throughput of 0) and a label no font has a glyph for (CJK) were each
    # a UserWarning with a source line on stderr; the chart is drawn all the same
    import warnings

    from graphbench.reports.figures import new_figure, plain_log_axis, save_figure

    fig, ax = new_figure()
    ax.plot([1, 2, 3], [0, 0, 0], label="点数")
    ax.legend()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plain_log_axis(ax)
        path = save_figure(fig, tmp_path / "chart.png", "吞吐量", "cpu")
    assert path.stat().st_size > 0
    assert [str(w.message) for w in caught if "matplotlib" in w.filename or "figures" in w.filename] == []
