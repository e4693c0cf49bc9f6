"""`--emit`: a ladder as vLLM, SGLang and TensorRT-LLM take it."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.emit import server_config

runner = CliRunner()


def test_each_server_gets_its_own_spelling():
    assert server_config([4, 1, 2, 2], "vllm") == (
        """--compilation-config '{"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 4}'""")
    assert server_config([1, 2, 4, 8], "sglang", max_requests=4) == "--cuda-graph-bs 1 2 4 --cuda-graph-max-bs 4"
    assert server_config([3, 6, 12], "trtllm", decode_query_len=3) == (
        "cuda_graph_config:\n  enable_padding: true\n  batch_sizes: [1, 2, 4]")
    with pytest.raises(GraphbenchError, match="choose from vllm, sglang, trtllm"):
        server_config([1], "nginx")
    with pytest.raises(GraphbenchError, match="empty"):
        server_config([], "vllm")
    with pytest.raises(GraphbenchError, match="multiple of 3"):
        server_config([4], "sglang", decode_query_len=3)


def test_ladder_and_tune_emit_the_ladder_they_chose():
    out = runner.invoke(app, ["ladder", "--max-num-seqs", "16", "--emit", "sglang"])
    assert out.exit_code == 0 and out.stdout == "--cuda-graph-bs 1 2 4 8 16 --cuda-graph-max-bs 16\n"
    out = runner.invoke(app, ["ladder", "--max-num-seqs", "16", "--emit", "vllm"])
    assert '"cudagraph_capture_sizes": [1, 2, 4, 8, 16, 24, 32]' in out.stdout
    tuned = runner.invoke(app, ["tune", "--distribution", "tests/data/tune/small.csv", "--max-graphs", "2",
                                "--format", "json"])
    emitted = runner.invoke(app, ["tune", "--distribution", "tests/data/tune/small.csv", "--max-graphs", "2",
                                  "--emit", "vllm"])
    assert tuned.exit_code == 0 and emitted.exit_code == 0, emitted.output
    import json

    sizes = next(l["sizes"] for l in json.loads(tuned.stdout)["ladders"] if l["name"] == "tuned")
    assert emitted.stdout.strip() == server_config(sizes, "vllm")
    bad = runner.invoke(app, ["tune", "--model", "uniform:1-8", "--max-graphs", "2", "--emit", "x"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: unknown server 'x'")
