"""`graphbench tune`: exact table and json for a small fixture, results and memory budget, plot, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.ladders import capture_sizes

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "tune"
SMALL = DATA / "small.csv"  # 1: 2, 3: 1, 4: 4, 8: 1 -> p = 1/4, 1/8, 1/2, 1/8
RESULTS = DATA / "results"
LOG = Path(__file__).parent / "data" / "vllm" / "cudagraph-metrics.log"  # its records name [1, 2, 4, 8, 16]
MiB = 2**20


def tune(*args: str):
    return runner.invoke(app, ["tune", *map(str, args)])


EXPECTED_TABLE = f"""\
distribution: {SMALL} (4 sizes in 1..8, mean 3.62)
objective: tokens (padding tokens per step); at most 4 graphs; top 8
tuned ladder (4 sizes): 1 3 4 8

ladder         graphs  pad tokens/step    waste    eager
tuned               4           0.0000    0.00%    0.00%
default            51           0.1250    3.12%    0.00%
interactivity      76           0.0000    0.00%    0.00%

Pareto curve: best ladder with at most n graphs (* = knee)
 graphs  pad tokens/step    waste  sizes
     1            4.3750   54.69%  8
     2            0.8750   21.88%  4 8
     3            0.1250    3.12%  1 4 8
     4*           0.0000    0.00%  1 3 4 8
knee: 4 graphs (0.0000 padding tokens per step, 0.00% waste): the fewest within 2 points of the best ladder's padding tokens per step, as a share of the mean batch

apply the tuned ladder:
  graphbench: --capture-sizes 1,3,4,8
  vLLM:       --compilation-config '{{"cudagraph_capture_sizes": [1, 3, 4, 8]}}'
"""


def test_table_is_exact() -> None:
    # Hand-checked: with 1 graph [8] pads 1->8, 3->8, 4->8: 7/4 + 5/8 + 4/2 = 4.375 tokens, waste
    # 7/32 + 5/64 + 1/4 = 54.6875%; with 2, [4 8]: 3/4 + 1/8 = 0.875; with 3, [1 4 8]: 1/8 (3->4). The knee:
    # 3 graphs pay 0.125 tokens a step more than 4, 3.4% of the mean batch 3.625, beyond 2 points.
    result = tune("--distribution", SMALL, "--max-graphs", 4, "--top", 8)
    assert result.exit_code == 0, result.output
    assert result.stdout == EXPECTED_TABLE


def test_json_is_exact() -> None:
    result = tune("--distribution", SMALL, "--max-graphs", 3, "--top", 8, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    default = list(capture_sizes(256).sizes)
    interactivity = list(capture_sizes(256, performance_mode="interactivity").sizes)

    def ladder(sizes, tokens, waste):
        return {"sizes": sizes, "expected_padded_tokens": tokens, "expected_waste_pct": waste,
                "num_sizes": len(sizes), "predicted_graph_memory_bytes": None, "objective": "tokens",
                "eager_pct": 0.0, "expected_step_ms": None, "predicted_capture_s": None}

    tuned = ladder([1, 4, 8], 0.125, 3.125)
    assert doc == {
        "distribution": {"source": str(SMALL), "num_sizes": 4, "min_size": 1, "max_size": 8, "mean": 3.625},
        "objective": "tokens",
        "max_graphs": 3,
        "max_graphs_from": "--max-graphs",
        "top": 8,
        "top_from": "--top",
        "engine": None,
        "multiple_of": 1,
        "required": [],
        "memory_budget_bytes": None,
        "memory_model": None,
        "tuned": tuned,
        "ladders": [
            {"name": "tuned", **tuned},
            {"name": "default", **ladder(default, 0.125, 3.125)},
            {"name": "interactivity", **ladder(interactivity, 0.0, 0.0)},
        ],
        "pareto": [
            {"num_graphs": 1, "value": 4.375, "expected_padded_tokens": 4.375, "expected_waste_pct": 54.6875,
             "sizes": [8]},
            {"num_graphs": 2, "value": 0.875, "expected_padded_tokens": 0.875, "expected_waste_pct": 21.875,
             "sizes": [4, 8]},
            {"num_graphs": 3, "value": 0.125, "expected_padded_tokens": 0.125, "expected_waste_pct": 3.125,
             "sizes": [1, 4, 8]},
        ],
        "knee": 3,  # 2 graphs pay 0.75 tokens a step more than 3: 20.7% of the mean batch 3.625
        "knee_points": 2.0,
        "apply": {
            "graphbench": "--capture-sizes 1,4,8",
            "vllm": "--compilation-config '{\"cudagraph_capture_sizes\": [1, 4, 8]}'",
        },
    }


def test_max_graphs_defaults_to_the_current_ladders_count() -> None:
    # the README's `tune --from vllm-server.log --emit vllm` once stopped at "Missing option '--max-graphs'"
    out = tune("--from", LOG, "--emit", "vllm")
    assert out.exit_code == 0, out.output
    # 5 graphs at most (the server's 1 2 4 8 16) under the server's top 16: 3, 5 and 16 tokens get their own
    assert out.stdout.strip() == ("""--compilation-config '{"cudagraph_capture_sizes": [3, 5, 16], """
                                  """"max_cudagraph_capture_size": 16}'""")
    doc = json.loads(tune("--from", LOG, "--format", "json").stdout)
    assert (doc["max_graphs"], doc["max_graphs_from"]) == (5, "the server log's capture sizes")
    assert "at most 5 graphs (as many as the server log's capture sizes); top 16 (the server log's largest" in tune("--from", LOG).stdout
    # a source that names no ladder: the default ladder's count (the table's "default" row)
    doc = json.loads(tune("--distribution", SMALL, "--format", "json").stdout)
    default = next(row for row in doc["ladders"] if row["name"] == "default")
    assert doc["max_graphs"] == default["num_sizes"] == len(capture_sizes(256).sizes) == 51
    assert doc["max_graphs_from"] == "the default ladder's"
    doc = json.loads(tune("--distribution", SMALL, "--max-graphs", 2, "--format", "json").stdout)
    assert (doc["max_graphs"], doc["max_graphs_from"]) == (2, "--max-graphs")


def test_the_default_max_graphs_keeps_the_forced_sizes() -> None:
    from graphbench.ladders.tune_inputs import MAX_GRAPHS, default_max_graphs

    assert default_max_graphs((1, 2, 4), (1, 2, 4, 8), 1) == (3, "the server log's capture sizes")
    assert default_max_graphs(None, (1, 2, 4, 8), 1) == (4, "the default ladder's")
    assert default_max_graphs((), (1, 2), 3) == (3, "the default ladder's")  # the top and two --require sizes
    assert default_max_graphs(tuple(range(1, 5000)), (), 1) == (
        MAX_GRAPHS, f"the server log's capture sizes (4999), capped at the {MAX_GRAPHS} a tune takes")


def test_waste_objective_and_default_top() -> None:
    result = tune("--distribution", SMALL, "--max-graphs", 2, "--objective", "waste", "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["top"] == 512 and doc["objective"] == "waste"
    # [4, 512]: 1->4 (3/4 * 1/4), 3->4 (1/4 * 1/8), 8->512 (504/512 * 1/8)
    assert doc["tuned"]["sizes"] == [4, 512]
    assert doc["pareto"][-1]["value"] == pytest.approx(100 * (3 / 16 + 1 / 32 + 504 / 512 / 8))
    assert doc["pareto"][0]["value"] == doc["pareto"][0]["expected_waste_pct"]


def test_from_results_with_workload_filter_and_memory_budget() -> None:
    result = tune("--from", RESULTS, "--workload", "closed-c4", "--max-graphs", 4, "--top", 8,
                  "--memory-budget-mib", 3.1, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["distribution"]["num_sizes"] == 4 and doc["distribution"]["mean"] == (3 + 2 + 12 + 96) / 32
    mm = doc["memory_model"]
    assert mm["per_graph_bytes"] == pytest.approx(MiB) and mm["per_token_bytes"] == pytest.approx(4096)
    # 4 sizes cost >= 4 MiB; 3 sizes fit (3 MiB + 4 KiB * sum). Of those, [1 4 8] pads 2->4, 3->4:
    # 2/32 + 4/32, less than [3 4 8] (1->3, 2->3: 6/32 + 1/32) or [2 4 8] (1->2, 3->4: 3/32 + 4/32)
    assert doc["tuned"]["sizes"] == [1, 4, 8] and doc["tuned"]["expected_padded_tokens"] == 6 / 32
    assert doc["tuned"]["predicted_graph_memory_bytes"] == pytest.approx(3 * MiB + 4096 * 13)
    assert doc["memory_budget_bytes"] == 3.1 * MiB
    unlimited = json.loads(tune("--from", RESULTS, "--workload", "closed-c4", "--max-graphs", 4, "--top", 8,
                                "--format", "json").stdout)
    assert unlimited["tuned"]["sizes"] == [1, 3, 4, 8] and unlimited["memory_budget_bytes"] is None


def test_results_of_two_gpu_types_fit_no_memory_model(tmp_path: Path) -> None:
    # a second machine's copy of the folder, on another GPU type: --from still gives the traffic, the memory
    # column goes with a warning, and --memory-from or a budget on them is one line and exit 2
    folders = {}
    for gpu in ("NVIDIA H200", "NVIDIA A100"):
        folders[gpu] = tmp_path / gpu.split()[-1].lower()
        folders[gpu].mkdir()
        for f in sorted((RESULTS / "h200").glob("*.json")):
            data = json.loads(f.read_text())
            data["environment"] = dict(data.get("environment") or {}, gpu=gpu)
            (folders[gpu] / f.name).write_text(json.dumps(data))
    h200, other = folders["NVIDIA H200"], folders["NVIDIA A100"]
    result = tune("--from", h200, "--from", other, "--max-graphs", 5)
    assert result.exit_code == 0, result.output
    assert "no graph-memory column: graph memory measured for 2 models or GPU types" in result.output
    assert "graph MiB" not in result.stdout
    for extra in (["--memory-from", h200, "--memory-from", other], ["--memory-budget-mib", 100]):
        refused = tune("--from", h200, "--from", other, "--max-graphs", 5, *extra)
        assert refused.exit_code == 2 and "a memory model is one model's on one GPU type" in refused.output
        assert len(refused.stderr.strip().splitlines()) == 1
    # the fixture's results do not say their GPU: beside the A100's they are no second GPU type
    unsaid = tune("--from", RESULTS, "--from", other, "--max-graphs", 5, "--memory-budget-mib", 100)
    assert unsaid.exit_code == 0 and "graph MiB" in unsaid.stdout, unsaid.output


def test_all_workloads_warn_about_eager_batches() -> None:
    result = tune("--from", RESULTS, "--max-graphs", 5)
    assert result.exit_code == 0, result.output
    assert "3.12% of batches are above the top 512 and run eager" in result.output
    assert "graph MiB" in result.stdout  # the memory model is fitted from --from when it can be
    doc = json.loads(tune("--from", RESULTS, "--max-graphs", 5, "--format", "json").stdout)
    # counts /64: 1:3 2:1 3:4 4:24 5:2 6:1 7:1 8:26 600:2; best 4 rungs below 512 pad 9/64 tokens, e.g.
    # [1 4 5 8]: 2->4, 3->4 (2 + 4), 6->8, 7->8 (2 + 1); [1 4 6 8] ties; [1 3 4 8] pays 10/64
    assert doc["tuned"]["expected_padded_tokens"] == 9 / 64 and doc["tuned"]["eager_pct"] == 3.125
    assert doc["tuned"]["sizes"] in ([1, 4, 5, 8, 512], [1, 4, 6, 8, 512])


def test_model_with_multiple_of_and_required() -> None:
    result = tune("--model", "closed:4", "--max-graphs", 3, "--multiple-of", 2, "--require", "2", "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["top"] == capture_sizes(256, num_speculative_tokens=1).max_capture_size == 512
    assert doc["tuned"]["sizes"] == [2, 8, 512] and doc["required"] == [2]
    assert doc["distribution"]["max_size"] == 8  # 4 requests x 2 tokens
    assert all(s % 2 == 0 for p in doc["pareto"] for s in p["sizes"])
    assert [p["num_graphs"] for p in doc["pareto"]] == [2, 3]


def test_candidates_restrict_to_the_default_ladder() -> None:
    doc = json.loads(tune("--model", "uniform:1-20", "--max-graphs", 3, "--top", 24, "--candidates", "default",
                          "--format", "json").stdout)
    assert set(doc["tuned"]["sizes"]) <= set(capture_sizes(256).sizes)
    doc = json.loads(tune("--model", "uniform:1-20", "--max-graphs", 3, "--top", 24, "--candidates", "5,10",
                          "--format", "json").stdout)
    assert doc["tuned"]["sizes"] == [5, 10, 24]


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "curve.png"
    result = tune("--distribution", SMALL, "--max-graphs", 4, "--plot", out)
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in result.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-graphs", 4], "give exactly one of --from, --distribution or --model"),
        (["--model", "closed:4", "--distribution", SMALL, "--max-graphs", 4], "give exactly one"),
        (["--model", "gamma:3", "--max-graphs", 4], "unknown distribution model"),
        (["--model", "closed:4", "--max-graphs", 0], "max_graphs must be a positive integer"),
        (["--model", "closed:4", "--max-graphs", 4, "--format", "csv"], "unknown format"),
        (["--model", "closed:4", "--max-graphs", 4, "--objective", "speed"], "unknown objective"),
        (["--model", "closed:4", "--max-graphs", 4, "--require", "1,x"], "--require must be comma-separated"),
        (["--model", "closed:4", "--max-graphs", 4, "--plot", "x.txt"], "plot file must end in"),
        (["--model", "closed:4", "--max-graphs", 4, "--memory-budget-mib", 100], "give --memory-from"),
        (["--model", "closed:4", "--max-graphs", 4, "--memory-budget-mib", 0.5, "--memory-from", RESULTS],
         "no ladder fits the graph-memory budget"),
        (["--model", "closed:4", "--max-graphs", 4, "--workload", "x"], "--workload filters"),
        (["--from", RESULTS, "--workload", "nope", "--max-graphs", 4], "no workload named nope"),
        (["--from", DATA / "missing", "--max-graphs", 4], "no such result file or folder"),
        (["--distribution", DATA / "missing.csv", "--max-graphs", 4], "distribution file not found"),
        (["--model", "closed:4", "--max-graphs", 4, "--top", 7, "--multiple-of", 2], "not a multiple of 2"),
        (["--model", "closed:4", "--max-graphs", 1, "--require", "2"], "fewer than the 2 sizes"),
        # (it listed --from's kinds, server logs among them, which --memory-from does not read)
        (["--model", "closed:4", "--max-graphs", 4, "--memory-from", LOG],
         "--memory-from reads graphbench result JSON (a sweep's results folder)"),
    ],
)
def test_errors_exit_2(args, message) -> None:
    result = tune(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_without_max_graphs_the_help_says_what_it_defaults_to() -> None:
    assert tune("--model", "closed:4").exit_code == 0
    help_text = runner.invoke(app, ["tune", "--help"], env={"COLUMNS": "300"}).stdout
    assert "(default: as many as the ladder the server runs now:" in help_text


def test_help_lists_the_options() -> None:
    result = tune("--help")
    assert result.exit_code == 0
    for option in ("--from", "--workload", "--distribution", "--model", "--max-graphs", "--objective",
                   "--max-num-seqs", "--top", "--multiple-of", "--require", "--memory-budget-mib",
                   "--memory-from", "--plot", "--format"):
        assert option in result.stdout


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("flags", [["--from"], ["--model", "uniform:1-64", "--max-graphs", "4", "--memory-from"]])
def test_a_fifo_as_results_is_refused_unread(tmp_path, flags):
    """Naming a --from file that is no source, tune read its first bytes to say what it was: on a FIFO the
    open blocked until something wrote to it (the fuzz suite's hostile file, 2026-12-06)."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "graphbench", "tune", *flags, str(fifo)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "not a graphbench result (not a regular file)" in done.stderr and "Traceback" not in done.stderr


def test_a_server_log_whose_ladder_line_is_cut_says_so(tmp_path: Path) -> None:
    # (the ladder was dropped without a word: the tuned top and the "server log" row went with it)
    cut = tmp_path / "cut.log"
    cut.write_text(LOG.read_text().replace("Capture sizes: [1, 2, 4, 8, 16]", "Capture sizes: [1, 2, 4"))
    result = tune("--from", cut, "--max-graphs", "4")
    assert result.exit_code == 0, result.output
    assert f"{cut}:5: a '- Capture sizes:' line holds no list of sizes a server captures (cut short" in result.output
    assert "cut short" not in tune("--from", LOG, "--max-graphs", "4").output


def test_candidates_above_the_top_are_named_not_dropped_in_silence() -> None:
    result = tune("--model", "closed:16", "--candidates", "1,4,16,1000", "--max-graphs", 3)
    assert result.exit_code == 0, result.output
    assert "--candidates 1000 above the top (512): not used" in result.stderr
    assert "above the top" not in tune("--model", "closed:16", "--candidates", "1,4,16", "--max-graphs", 3).stderr
