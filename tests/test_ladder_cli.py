"""`graphbench ladder`: table, json, csv, plot, bad input, and no torch import."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphbench
from graphbench.cli.main import app

runner = CliRunner()
SEED_BATCHES = [1, 3, 5, 9, 17, 33, 100, 250, 300, 600]


def run(*args: str):
    return runner.invoke(app, ["ladder", *args])


def naive_rows(sizes: list[int], batches: list[int]) -> list[dict]:
    """Expected rows by linear scan, independent of the library's bisect."""
    rows = []
    for n in batches:
        fitting = [s for s in sizes if s >= n]
        if fitting:
            p = min(fitting)
            rows.append({"batch": n, "padded": p, "waste_pct": round(100 * (p - n) / p, 2)})
        else:
            rows.append({"batch": n, "padded": None, "waste_pct": None})
    return rows


def naive_average_pct(sizes: list[int], top: int) -> float:
    total = Fraction(0)
    for n in range(1, top + 1):
        fitting = [s for s in sizes if s >= n]
        if fitting:
            total += Fraction(min(fitting) - n, min(fitting))
    return round(float(100 * total / top), 2)


def test_table_output_has_the_key_numbers() -> None:
    result = run()
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "max_num_seqs=256 -> max capture size 512" in out
    assert "51 sizes: [1 2 4 8 16 24 32 40] ... [480 496 512]" in out
    assert "76 sizes: [1 2 3 4 5 6 7 8] ... [480 496 512]" in out
    assert "default ladder (selected)" in out
    assert "43.75%" in out  # 9 -> 16
    assert "eager" in out  # 600 is above 512
    assert "FULL_AND_PIECEWISE" in out and "86" in out and "136" in out
    assert f"{naive_average_pct([1, 2, 4] + list(range(8, 256, 8)) + list(range(256, 513, 16)), 512):.2f}%" in out
    assert result.stderr == ""


def test_table_for_64_seqs_and_interactivity_selected() -> None:
    result = run("--max-num-seqs", "64", "--performance-mode", "interactivity", "--batches", "9,200")
    assert result.exit_code == 0, result.output
    assert "max capture size 128" in result.stdout
    assert "interactivity ladder (selected)" in result.stdout
    assert "7.29%" in result.stdout
    assert "200" in result.stdout and "eager" in result.stdout


def test_json_for_64_seqs_equals_the_expected_structure() -> None:
    result = run("--max-num-seqs", "64", "--format", "json")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("\n") == 1  # exactly one JSON object on one line
    doc = json.loads(result.stdout)
    default = [1, 2, 4] + list(range(8, 129, 8))
    inter = list(range(1, 33)) + list(range(40, 129, 8))
    assert doc["max_num_seqs"] == 64
    assert doc["max_capture_size"] == 128
    assert [lad["name"] for lad in doc["ladders"]] == ["default", "interactivity"]
    expected = [
        {"name": "default", "sizes": default, "average_padding_pct": 7.29, "rows": naive_rows(default, SEED_BATCHES)},
        {
            "name": "interactivity",
            "sizes": inter,
            "average_padding_pct": naive_average_pct(inter, 128),
            "rows": naive_rows(inter, SEED_BATCHES),
        },
    ]
    for got, want in zip(doc["ladders"], expected):
        assert {k: got[k] for k in want} == want
    assert doc["ladders"][0]["rows"][3] == {"batch": 9, "padded": 16, "waste_pct": 43.75}
    assert {"batch": 250, "padded": None, "waste_pct": None} in doc["ladders"][0]["rows"]
    assert doc["ladders"][0]["selected"] is True and doc["selected"] == "default"
    assert doc["ladders"][0]["num_graphs"]["FULL_AND_PIECEWISE"] == 19 + 11
    assert doc["ladders"][0]["eager_fraction_pct"] == 0.0


def test_json_for_256_seqs_graph_counts() -> None:
    doc = json.loads(run("--format", "json", "--batches", "9").stdout)
    default = doc["ladders"][0]
    assert len(default["sizes"]) == 51 and len(doc["ladders"][1]["sizes"]) == 76
    assert default["num_graphs"] == {
        "NONE": 0,
        "PIECEWISE": 51,
        "FULL": 51,
        "FULL_DECODE_ONLY": 35,
        "FULL_AND_PIECEWISE": 86,
    }
    assert default["rows"] == [{"batch": 9, "padded": 16, "waste_pct": 43.75}]


def test_csv_has_one_row_per_ladder_and_batch() -> None:
    result = run("--max-num-seqs", "64", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 2 * len(SEED_BATCHES)
    assert list(rows[0]) == ["ladder", "batch", "padded", "waste_pct"]
    assert rows[3] == {"ladder": "default", "batch": "9", "padded": "16", "waste_pct": "43.75"}
    eager = next(r for r in rows if r["ladder"] == "interactivity" and r["batch"] == "250")
    assert eager["padded"] == "" and eager["waste_pct"] == ""


def test_custom_capture_sizes_with_warnings() -> None:
    result = run(
        "--capture-sizes", "8, 1,2,2,4096", "--max-num-batched-tokens", "2048", "--format", "json", "--batches", "3,9"
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    custom = doc["ladders"][2]
    assert custom["name"] == "custom" and custom["selected"] is True and doc["selected"] == "custom"
    assert custom["sizes"] == [1, 2, 8]
    assert custom["rows"] == naive_rows([1, 2, 8], [3, 9])
    assert "duplicate" in result.stderr and "4096" in result.stderr
    assert all(line.startswith("warning: ") for line in result.stderr.splitlines())
    table = run("--capture-sizes", "1,2,2,8")
    assert table.exit_code == 0 and "custom ladder (selected)" in table.stdout
    assert "3 sizes: [1 2 8]" in table.stdout


def test_custom_capture_sizes_are_not_capped_by_max_num_seqs() -> None:
    """docs/MACHINERY.md §1.5: a user list is only filtered to <= max_num_batched_tokens; its largest rung is the top.
    --max-num-seqs sets the top of the default and interactivity ladders only (and the help says so)."""
    result = run("--capture-sizes", "1000,2000", "--max-num-seqs", "8", "--batches", "3,1500,2500")
    assert result.exit_code == 0, result.output
    decode_note = ("warning: custom ladder: no decode batch uses the capture sizes above max_num_seqs 8 x "
                   "decode_query_len 1 = 8 tokens: 1000, 2000 (only mixed (prefill) batches can; FULL_DECODE_ONLY "
                   "captures no graph for them)")
    assert result.stderr.splitlines() == [decode_note]  # kept, not capped: only said
    assert result.stdout.splitlines()[:4] == [
        "max_num_seqs=8 -> max capture size 16",
        "default ladder:            5 sizes: [1 2 4 8 16]",
        "interactivity ladder:      16 sizes: [1 2 3 4 5 6 7 8] ... [14 15 16]",
        "custom ladder (selected):  2 sizes: [1000 2000], top 2000",
    ]
    capped = run("--capture-sizes", "1000,2000", "--max-num-seqs", "8", "--max-num-batched-tokens", "1500",
                 "--format", "json", "--batches", "3,1500,2500")  # fmt: skip
    assert capped.exit_code == 0, capped.output
    custom = json.loads(capped.stdout)["ladders"][2]
    assert custom["sizes"] == [1000] and custom["max_capture_size"] == 1000
    assert capped.stderr.splitlines() == [
        "warning: custom ladder: dropped capture sizes above max_num_batched_tokens 1500: 2000",
        decode_note.replace("1000, 2000", "1000")]

    from typer.main import get_command

    helps = {p.opts[0]: p.help for p in get_command(app).commands["ladder"].params}
    assert helps["--capture-sizes"] == (
        "A custom ladder, e.g. 1,2,4,8: de-duplicated, sorted, sizes above --max-num-batched-tokens dropped "
        "(--max-num-seqs does not cap it: its largest size is its top); shown as 'custom' and selected."
    )
    assert helps["--max-num-seqs"] == (
        "Most requests per step; sets the top rung of the default and interactivity ladders (2x, capped at 512)."
    )


def test_speculative_blackwell_and_caps() -> None:
    doc = json.loads(run("--num-speculative-tokens", "1", "--format", "json").stdout)
    assert all(s % 2 == 0 for lad in doc["ladders"] for s in lad["sizes"])
    assert doc["decode_query_len"] == 2
    doc = json.loads(run("--max-num-seqs", "1024", "--blackwell", "--format", "json").stdout)
    assert doc["max_capture_size"] == 1024
    doc = json.loads(run("--max-num-seqs", "64", "--max-num-batched-tokens", "100", "--format", "json").stdout)
    assert doc["max_capture_size"] == 96
    doc = json.loads(run("--max-capture-size", "64", "--format", "json").stdout)
    assert doc["max_capture_size"] == 64 and doc["ladders"][0]["sizes"][-1] == 64


def test_distribution_file_changes_the_averages(tmp_path: Path) -> None:
    hist = tmp_path / "hist.csv"
    hist.write_text("batch_size,count\n9,1\n200,1\n")
    result = run("--max-num-seqs", "64", "--distribution", str(hist), "--format", "json")
    assert result.exit_code == 0, result.output
    default = json.loads(result.stdout)["ladders"][0]
    # 9 -> 16 wastes 7/16 with probability 1/2; 200 runs eager (zero waste)
    assert default["average_padding_pct"] == round(100 * 7 / 32, 2)
    assert default["eager_fraction_pct"] == 50.0
    table = run("--max-num-seqs", "64", "--distribution", str(hist))
    assert table.exit_code == 0
    assert "eager batches" in table.stdout and "50.00%" in table.stdout and "hist.csv" in table.stdout


def test_plot_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "waste.png"
    result = run("--max-num-seqs", "64", "--capture-sizes", "1,2,8,64", "--plot", str(out))
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json_result = run("--format", "json", "--plot", str(tmp_path / "b.png"))
    assert json.loads(json_result.stdout)["max_capture_size"] == 512  # stdout stays pure JSON


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-num-seqs", "0"], "max_num_seqs must be a positive integer"),
        (["--max-num-seqs", "-4"], "max_num_seqs"),
        (["--performance-mode", "turbo"], "unknown performance mode 'turbo'"),
        (["--capture-sizes", "1,x"], "--capture-sizes must be comma-separated integers"),
        (["--capture-sizes", "0,4"], "capture sizes must be positive integers"),
        (["--capture-sizes", "4096", "--max-num-batched-tokens", "2048"], "above max_num_batched_tokens"),
        (["--capture-sizes", ""], "--capture-sizes"),
        (["--batches", "1,,2"], "--batches"),
        (["--batches", "-1"], "batch sizes must be positive integers"),
        (["--num-speculative-tokens", "-1"], "num_speculative_tokens"),
        (["--max-num-batched-tokens", "0"], "max_num_batched_tokens"),
        (["--max-num-batched-tokens", "1"], "max_num_batched_tokens (1) must be >= max_num_seqs (256)"),
        (["--max-capture-size", "0"], "max_capture_size"),
        (["--distribution", "/no/such/file.csv"], "distribution file not found"),
        (["--format", "yaml"], "unknown format 'yaml'"),
        (["--plot", "/no/such/dir/out.png"], "plot directory does not exist"),
        (["--plot", "out.gif"], "plot file must end in"),
        # what a fuzz pass found accepted without a word
        (["--capture-sizes", "1,2", "--performance-mode", "interactivity"], "give one of them"),
        (["--mixed-ladder", ""], "--mixed-ladder takes shared, tokens, none or token counts"),
        (["--batches", "99999999999999999999999"], "more tokens than one step holds"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert message in lines[0]


def test_bad_distribution_row_is_reported_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("batch_size,count\n1,2\nx,1\n")
    result = run("--distribution", str(bad))
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {bad}:3: batch_size must be a positive integer, got 'x'"


def test_the_distribution_files_format_is_stated_in_the_help_and_the_error(tmp_path: Path) -> None:
    formats = ("a CSV with a header naming batch_size or num_tokens, and optionally count, weight or frequency "
               "(`batch_size,count`); `size,count` rows without a header; one batch size per line")
    help_text = " ".join(runner.invoke(app, ["ladder", "--help"], env={"COLUMNS": "2000"}).stdout.split())
    assert formats in help_text
    for words in ('a JSON object {"size": count} or array of sizes', "JSONL, one object a line with batch_size or "
                  "num_tokens", "a vLLM log with --cudagraph-metrics tables", "Sizes are integers 1..1048576, counts "
                  "numbers >= 0 (1 a row without a count column)", "lines starting with # are skipped"):
        assert words in help_text
    for first in ("size,n", "1,2,3", "1.5", "1;2"):
        bad = tmp_path / "sizes.csv"
        bad.write_text(first + "\n4\n")
        result = run("--distribution", str(bad))
        assert result.exit_code == 2
        assert result.stderr.strip() == (f"error: {bad}:1: not a batch-size distribution, got {first!r}; expected one "
                                         f"of: {formats} (or JSON, JSONL, a vLLM log)")
    for text in ("batch_size,count\n8,3\n", "8,3\n", "# sizes\n8\n8\n\n8\n", "num_tokens,weight\n8,1.5\n"):
        (tmp_path / "ok.csv").write_text(text)  # what the help names, read
        assert run("--distribution", str(tmp_path / "ok.csv"), "--format", "json").exit_code == 0


def test_help_lists_the_options() -> None:
    result = runner.invoke(app, ["ladder", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--max-num-seqs", "--performance-mode", "--capture-sizes", "--distribution", "--plot", "--format"):
        assert option in result.stdout


def test_ladder_path_never_imports_torch() -> None:
    src = str(Path(graphbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code = (
        "import graphbench.ladders, graphbench.cli.main, graphbench.cli.ladder, sys; "
        "assert 'torch' not in sys.modules, 'torch was imported'; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def test_sizes_no_decode_batch_uses_are_named_on_stderr_and_in_the_json() -> None:
    """max_num_seqs 64: a decode step carries at most 64 tokens, so 128 and 256 serve mixed steps only."""
    args = ("--max-num-seqs", "64", "--capture-sizes", "1,2,4,8,16,32,64,128,256", "--batches", "100")
    note = ("no decode batch uses the capture sizes above max_num_seqs 64 x decode_query_len 1 = 64 tokens: "
            "128, 256 (only mixed (prefill) batches can; FULL_DECODE_ONLY captures no graph for them)")
    table = run(*args)
    assert table.exit_code == 0, table.output
    assert table.stderr.splitlines() == [f"warning: custom ladder: {note}"]
    assert "custom ladder (selected):  9 sizes: [1 2 4 8 16 32 64 128 256], top 256" in table.stdout
    result = run(*args, "--format", "json")
    doc = json.loads(result.stdout)  # stdout stays one JSON document
    custom = doc["ladders"][2]
    assert custom["warnings"] == [note]
    assert custom["sizes"] == [1, 2, 4, 8, 16, 32, 64, 128, 256] and custom["max_capture_size"] == 256
    assert custom["num_graphs"]["FULL_DECODE_ONLY"] == 7 and custom["num_graphs"]["PIECEWISE"] == 9
    assert [d["warnings"] for d in doc["ladders"][:2]] == [[], []]  # the default ladders' 2x top is by design
    assert run("--max-num-seqs", "64", "--capture-sizes", "1,8,64").stderr == ""


def test_sizes_the_default_token_budget_drops_are_named() -> None:
    result = run("--max-num-seqs", "4", "--num-speculative-tokens", "1", "--capture-sizes", "2,8,4096",
                 "--batches", "3")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: custom ladder: no decode batch uses the capture sizes above max_num_seqs 4 x decode_query_len "
        "2 = 8 tokens: 4096 (only mixed (prefill) batches can; FULL_DECODE_ONLY captures no graph for them)",
        "warning: custom ladder: an engine with the default max_num_batched_tokens 2048 drops the capture sizes "
        "above it: 4096 (8192 on a GPU of >= 70 GiB other than an A100; set max_num_batched_tokens for your "
        "engine's ladder)",
    ]
    given = run("--max-num-seqs", "4", "--capture-sizes", "2,4096", "--max-num-batched-tokens", "4096")
    assert "default max_num_batched_tokens" not in given.stderr
