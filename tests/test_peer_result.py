"""A transformers peer's result file holds what was measured of its start-up and nothing it never measured."""

from __future__ import annotations

import json
import math

from graphbench.bench.peers import run_peer_point
from graphbench.bench.workloads import LengthDist, Workload
from graphbench.reports.frame import results_frame
from graphbench.reports.store import load_results


def test_a_peer_leaves_capture_and_graph_memory_unmeasured(tmp_path):
    workload = Workload(kind="closed", concurrency=2, num_requests=2, prompt_len=LengthDist.parse("8", "p"),
                        output_len=LengthDist.parse("4", "o"))
    path = run_peer_point("hf-eager", "tiny-llama", "float32", "cpu", [workload], 1, "hf-eager", tmp_path)
    startup = json.loads(path.read_text())["startup"]
    assert startup["load_s"] > 0 and startup["first_call_s"] > 0
    assert not {"capture_s", "graph_memory_bytes", "dynamo_s", "inductor_s"} & set(startup)
    row = results_frame(load_results([tmp_path]).results).iloc[0]
    assert math.isnan(row["graph_memory_bytes"]) and math.isnan(row.get("capture_s", math.nan))
    assert row["output_tokens_per_s"] > 0
