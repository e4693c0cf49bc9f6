"""Faults on the H200: running out of memory at start-up is a failed point, and the sweep goes on."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.reports.store import load_results

pytestmark = pytest.mark.gpu
runner = CliRunner()


def test_out_of_memory_during_capture_is_a_failed_point(tmp_path):
    # A KV cache that leaves almost nothing free, then a 256-sequence ladder of FULL_AND_PIECEWISE
    # graphs with 8192-token pieces: the start-up runs out of memory while warming up / capturing.
    free, _ = torch.cuda.mem_get_info()
    per_block = 2 * 16 * 16 * 8 * 64 * 2  # llama-3.2-1b, bf16, block 16: K and V, all layers
    absurd = int((free - 3.2 * 2**30) // per_block)
    result = runner.invoke(app, [
        "sweep", "--model", "llama-3.2-1b", "--levels", "2", "--ladders", "default", "--peers", "none",
        "--grid", f"num_kv_blocks={absurd},4096", "--max-num-seqs", "256", "--concurrency", "1",
        "--output-len", "8", "--repeats", "1", "--results", str(tmp_path), "--timeout", "400"])
    assert result.exit_code == 0, result.output
    by_label = {r["label"]: r for r in load_results([tmp_path]).results}
    failed = by_label[f"O2_default_num_blocks={absurd}"]
    assert failed["status"] == "failed" and "out of memory" in failed["failure"]["reason"].lower()
    assert by_label["O2_default_num_blocks=4096"]["status"] == "ok"
