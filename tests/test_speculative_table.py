"""reports/speculative_table.py: each k > 0 point against the same config at k = 0, on its own GPU type."""

from __future__ import annotations

import pytest

from graphbench.reports.speculative_table import speculative_table


def _result(label: str, k: int, tps: float, gpu: str) -> dict:
    summary = {"output_tokens_per_s": {"median": tps}, "tpot_p50_ms": {"median": 1000.0 / tps},
               "spec_acceptance_rate": {"median": 0.5 if k else 0.0}}
    return {"label": label, "system": "graphbench", "status": "ok", "model": "tiny-llama",
            "environment": {"device": "cuda", "gpu": gpu},
            "config": {"model": {"model": "tiny-llama"}, "speculative": {"num_speculative_tokens": k}},
            "workloads": [{"name": "closed-c4", "summary": summary}]}


def test_each_point_is_set_against_k0_on_its_own_gpu_type():
    results = [_result("k0", 0, 100.0, "NVIDIA H200"), _result("k2", 2, 150.0, "NVIDIA H200"),
               _result("k0", 0, 50.0, "NVIDIA A100"), _result("k2", 2, 60.0, "NVIDIA A100")]
    table = speculative_table(results).set_index("point")
    assert sorted(table.index) == ["k2 @ NVIDIA A100", "k2 @ NVIDIA H200"]
    assert table.loc["k2 @ NVIDIA H200", "tok/s vs k=0 %"] == pytest.approx(50.0)
    assert table.loc["k2 @ NVIDIA A100", "tok/s vs k=0 %"] == pytest.approx(20.0)
    one = speculative_table(results[:2]).set_index("point")
    assert list(one.index) == ["k2"] and one.loc["k2", "tok/s vs k=0 %"] == pytest.approx(50.0)
