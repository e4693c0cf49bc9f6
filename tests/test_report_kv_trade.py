"""The report's KV trade: each ladder's graph memory counted in KV-cache tokens, measured and as a memory
model fitted over the report's points predicts it (reports/ladder_table.kv_trade)."""

from __future__ import annotations

import pytest

from graphbench.reports.ladder_table import kv_trade
from tests.test_tune_engine_limits import result

MIB = 2**20


def _point(label: str, sizes: list[int], graph_mib: float) -> dict:
    r = result(label, {1: 1}, seqs=8)
    r["startup"].update(capture_sizes=sizes, graph_memory_bytes=graph_mib * MIB, kv_cache_tokens=1000,
                        kv_cache_bytes=1000 * 32 * 1024, num_graphs={"FULL": len(sizes)})
    return r


def test_graph_memory_in_kv_tokens_measured_and_modelled():
    # memory = 10 MiB + 2 MiB a graph exactly; 32 KiB a KV token: 16 MiB = 512 tokens, 18 = 576, 12 = 384
    points = [_point("three", [1, 2, 4], 16), _point("four", [1, 2, 4, 8], 18), _point("one", [8], 12)]
    trade = kv_trade(points)
    assert trade["three"] == pytest.approx((1000, 512, 512)) and trade["four"] == pytest.approx((1000, 576, 576))
    assert trade["one"] == pytest.approx((1000, 384, 384))
    lone = kv_trade([_point("three", [1, 2, 4], 16)])  # one ladder shape: the model is per graph only
    assert lone["three"] == pytest.approx((1000, 512, 512))
    no_kv = _point("x", [1], 4)
    del no_kv["startup"]["kv_cache_bytes"]  # written before the KV bytes were recorded: no row
    assert "x" not in kv_trade([no_kv])


def test_the_ladders_table_shows_the_trade(tmp_path):
    from graphbench.reports.report import write_report
    from graphbench.reports.store import write_result

    for r in (_point("three", [1, 2, 4], 16), _point("four", [1, 2, 4, 8], 18)):
        write_result(tmp_path / "results", "h200", r["label"], r)
    text = (write_report([tmp_path / "results"], tmp_path / "report").out_dir / "report.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| ladder |"))
    assert header.endswith("| KV tokens | graphs as KV tokens | graphs as KV tokens (model) |")
    row = next(line for line in text.splitlines() if line.startswith("| three |"))
    assert row.endswith("| 1,000 | 512 | 512 |")

