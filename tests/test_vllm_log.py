"""Batch sizes from vLLM's --cudagraph-metrics tables: every table summed, prefixes ignored, errors by line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import load_distribution
from graphbench.ladders.vllm_log import parse_cudagraph_metrics

LOG = Path(__file__).parent / "data" / "vllm" / "cudagraph-metrics.log"


def test_every_table_is_summed_behind_any_prefix():
    counts = parse_cudagraph_metrics(LOG.read_text(), "log")
    assert counts == {3: 150, 5: 40, 700: 2, 16: 8}
    dist = load_distribution(LOG)
    assert dist.sizes == (3, 5, 16, 700) and dist[3] == pytest.approx(150 / 200)


@pytest.mark.parametrize("row, match", [
    ("| 3 | 4 | x | FULL | 1 |", "log:3: a cudagraph-metrics row needs integer"),
    ("| 5 | 4 | 0 | FULL | 1 |", "log:3: unpadded 5, padded 4"),
    ("| 3 | 4 | 1 | EAGER | 1 |", "log:3: unknown runtime mode 'EAGER'"),
    ("| 3 | 4 | 1 | FULL |", "log:3: a cudagraph-metrics row has 4 cells, expected 5"),
    ("| 3 | 4 | 1 | FULL | 1 | 7 |", "log:3: a cudagraph-metrics row has 6 cells"),
    ("| 3 | 4 | 1 | FU", "log:3: a cudagraph-metrics row cut short"),
    ("| 3 | 8 | 1 | FULL | 1 |", "log:3: paddings 1 is not padded 8 - unpadded 3"),
])
def test_a_bad_row_is_named_by_its_line(row, match):
    text = "| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |\n|---|---|---|---|---|\n" + row
    with pytest.raises(GraphbenchError, match=match):
        parse_cudagraph_metrics(text, "log")
    with pytest.raises(GraphbenchError, match="no cudagraph-metrics table"):
        parse_cudagraph_metrics("INFO nothing here\n", "log")


def test_the_table_vllm_writes_is_read_as_written():
    # vllm/compilation/cuda_graph.py CUDAGraphLogging.generate_metric_table: one logger call (the prefix on
    # its first line only), cells left-justified to the widest value, the mode as str() of the enum in some
    # versions, rows by count, a blank line after the table; then a later log line ends it
    header = "| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode            | Count |"
    rows = ["| 3               | 4             | 1            | CUDAGraphMode.FULL      | 120   |",
            "| 700             | 700           | 0            | CUDAGraphMode.NONE      | 2     |",
            "| 33              | 40            | 7            | CUDAGraphMode.PIECEWISE | 1     |"]
    separator = "|" + "|".join("-" * (len(c) + 2) for c in header.strip("| ").split(" | ")) + "|"
    text = "\r\n".join(["INFO 12-01 10:00:00 [cuda_graph.py:118] **CUDAGraph Config Settings:**", "",
                         "- Mode: FULL_AND_PIECEWISE", "- Capture sizes: [1, 2, 4]", "", "**CUDAGraph Stats:**", "",
                         header, separator, *rows, "INFO 12-01 10:00:05 [loggers.py:123] Engine 000: 1 | 2"])
    assert parse_cudagraph_metrics(text, "log") == {3: 120, 700: 2, 33: 1}


def test_tune_from_a_server_log(tmp_path):
    runner = CliRunner()
    out = runner.invoke(app, ["tune", "--from", str(LOG), "--max-graphs", "2", "--emit", "vllm"])
    assert out.exit_code == 0, out.output
    # at most 2 graphs with the top rung (512) kept: 16 covers 98% of the steps (3, 5 and 16 tokens)
    assert out.stdout.strip() == """--compilation-config '{"cudagraph_capture_sizes": [16, 512], "max_cudagraph_capture_size": 512}'"""
    mixed = runner.invoke(app, ["tune", "--from", str(LOG), "--from", "tests/data/tune/results", "--max-graphs", "2"])
    assert mixed.exit_code == 2 and "mixes vLLM logs" in mixed.stderr
