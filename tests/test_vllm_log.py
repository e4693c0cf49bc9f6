"""Batch sizes from vLLM's --cudagraph-metrics tables: every table summed, prefixes ignored, errors by line."""

from __future__ import annotations

import gzip
import re
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
    ("| 3 | 4 | 1 | FULL | 10000000000000000 |", r"log:3: a count of 10000000000000000 steps is not a possible row's"),
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
    # the top is the server's own (its log announces capture sizes 1..16), not the default ladder's 512;
    # at most 2 graphs with it kept: 5 under 16 covers the 3- and 5-token steps
    assert out.stdout.strip() == """--compilation-config '{"cudagraph_capture_sizes": [5, 16], "max_cudagraph_capture_size": 16}'"""
    table = runner.invoke(app, ["tune", "--from", str(LOG)])
    assert table.exit_code == 0, table.output
    assert "at most 5 graphs (as many as the server log's capture sizes); top 16 (the server log's largest" in table.stdout
    assert re.search(r"^server log\s+5\s", table.stdout, re.M), table.stdout
    assert runner.invoke(app, ["tune", "--from", str(LOG), "--top", "64", "--emit", "vllm"]).stdout.count("64") == 2
    mixed = runner.invoke(app, ["tune", "--from", str(LOG), "--from", "tests/data/tune/results", "--max-graphs", "2"])
    assert mixed.exit_code == 2 and "mixes vLLM server logs" in mixed.stderr


def test_the_servers_ladder_is_the_largest_its_records_name(tmp_path):
    # CUDAGraphLogging.settings_header: "- Capture sizes: {str(cg_capture_sizes or [])}" before each table
    from graphbench.ladders.vllm_log import read_server_log

    assert read_server_log(LOG)[:3] == ({3: 150, 5: 40, 700: 2, 16: 8}, (1, 2, 4, 8, 16), ())
    text = LOG.read_text()
    log = tmp_path / "server.log"
    log.write_text(text.replace("[1, 2, 4, 8, 16]", "[]"))  # cudagraphs off: no ladder
    assert read_server_log(log).capture_sizes is None
    log.write_text(text.replace("[1, 2, 4, 8, 16]", "[8, 1, x]") + text.replace("16]", "16, 24, 32]"))
    read = read_server_log(log)
    assert read.capture_sizes == (1, 2, 4, 8, 16, 24, 32)  # a line it cannot read names none, and is counted
    assert read.unread_ladder_lines == (5,)


def test_a_log_redirected_by_windows_powershell_is_read_as_utf16(tmp_path):
    # `docker logs vllm > vllm.log` in Windows PowerShell 5.1 writes UTF-16LE with a byte-order mark and CRLF line
    # ends. The fixture's lines are vLLM 0.13's: vllm/logging_utils/formatter.py NewLineFormatter (the prefix
    # repeated on each line of the record, which ends in a line holding the prefix alone),
    # vllm/utils/system_utils.py _add_prefix (the cyan `(APIServer pid=1) ` tag) and
    # vllm/compilation/cuda_graph.py CUDAGraphLogging.generate_metric_table (settings header, then the table)
    utf16 = Path(__file__).parent / "data" / "vllm" / "cudagraph-metrics-utf16.log"
    assert utf16.read_bytes()[:2] == b"\xff\xfe"
    assert dict(load_distribution(utf16)) == pytest.approx({6: 30 / 122, 7: 90 / 122, 519: 2 / 122})
    packed = tmp_path / "vllm.log.gz"
    packed.write_bytes(gzip.compress(utf16.read_bytes()))
    assert load_distribution(packed).sizes == (6, 7, 519)
    out = CliRunner().invoke(app, ["tune", "--from", str(utf16), "--max-graphs", "2"])
    assert out.exit_code == 0, out.output


def test_a_file_tune_cannot_read_is_named_with_why_and_what_from_reads(tmp_path):
    # benchmarks/benchmark_serving.py's console output (vLLM 0.7-0.8: print(args), then the "Serving Benchmark
    # Result" block of "{:<40} {:<10}" lines), not its --save-result JSON: no vLLM log line, no table, not JSON
    stdout = Path(__file__).parent / "data" / "vllm" / "benchmark-serving-stdout.txt"
    out = CliRunner().invoke(app, ["tune", "--from", str(stdout), "--max-graphs", "2"])
    assert out.exit_code == 2
    assert f"{stdout} is the console output of `vllm bench serve`" in out.output
    assert "--save-result --save-detailed" in out.output and "--cudagraph-metrics" in out.output
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    out = CliRunner().invoke(app, ["tune", "--from", str(other), "--max-graphs", "2"])
    assert out.exit_code == 2
    assert f"{other} is not a graphbench result (Expecting value: line 1 column 1" in out.output
    assert "holds no vLLM log line among its first lines" in out.output


def test_bench_serve_console_output_behind_vllm_log_lines_is_named_as_such(tmp_path):
    # `vllm bench serve` (vLLM >= 0.9) prints its own INFO lines before the "Serving Benchmark Result" block, so its
    # console output reads as a server log; it holds no table, and the error says what to give instead
    stdout = Path(__file__).parent / "data" / "vllm" / "benchmark-serving-stdout.txt"
    console = tmp_path / "bench-serve.txt"
    console.write_text("INFO 12-04 10:11:12 [__init__.py:241] Automatically detected platform cuda.\n"
                       + stdout.read_text())
    out = CliRunner().invoke(app, ["tune", "--from", str(console), "--max-graphs", "2"])
    assert out.exit_code == 2
    assert "the console output of `vllm bench serve`" in out.output and "--save-detailed" in out.output
    with pytest.raises(GraphbenchError, match="console output of `vllm bench serve`"):
        load_distribution(console)


def _record(tag: str, stamp: str, lines: list[str]) -> list[str]:
    # one logger call through vLLM's NewLineFormatter (the prefix on every line, joined by "\r\n", a last line
    # holding the prefix alone) and _add_prefix (the process tag on every line); the stat logger's file:line
    prefix = f"{tag}INFO 12-02 16:51:{stamp} [loggers.py:257] "
    return [prefix + text + "\r\n" for text in lines[:-1]] + [prefix + lines[-1] + "\n", prefix + "\n"]


TABLE = ["**CUDAGraph Config Settings:**", "", "- Mode: CUDAGraphMode.FULL_AND_PIECEWISE", "- Capture sizes: [1, 2, 4, 8]",
         "", "**CUDAGraph Stats:**", "",
         "| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode            | Count |",
         "|-----------------|---------------|--------------|-------------------------|-------|",
         "| 3               | 4             | 1            | CUDAGraphMode.FULL      | 120   |",
         "| 5               | 8             | 3            | CUDAGraphMode.FULL      | 40    |",
         "| 700             | 700           | 0            | CUDAGraphMode.NONE      | 2     |",
         "| 7               | 8             | 1            | CUDAGraphMode.PIECEWISE | 1     |"]


def test_a_line_of_another_writer_inside_a_table_neither_ends_it_nor_is_counted():
    # C libraries (NCCL, torch's C++ warnings) write to the same stdout without vLLM's process tag; an untagged
    # table (one process, VLLM_ENABLE_V1_MULTIPROCESSING=0) goes on past their lines, and past another untagged
    # vLLM line, whose record differs
    lines = _record("", "04", TABLE)
    for foreign in ("host:4242:4300 [0] NCCL INFO Channel 00/02 : 0 1\n",
                    "[W1202 16:51:04.123456 ProcessGroupNCCL.cpp:1234] Warning: x | y |\n",
                    "INFO 12-02 16:51:04 [core.py:99] engine core line\n"):
        text = "".join(lines[:11] + [foreign] + lines[11:])
        assert parse_cudagraph_metrics(text, "log") == {3: 120, 5: 40, 700: 2, 7: 1}, foreign


def test_a_tag_written_apart_from_its_line_leaves_the_row_to_its_record():
    # _add_prefix writes the tag and the rest of a line apart: unbuffered (PYTHONUNBUFFERED=1), another process's
    # write lands between them, and a row of one process's table carries another's tag, or none
    one = _record("(APIServer pid=1) ", "04", TABLE)
    two = _record("(APIServer_1 pid=2) ", "07", TABLE[:-3])  # 3: 120 only
    mixed = one[:10] + ["(APIServer pid=1) " + two[0]] + [two[1].split(") ", 1)[1]] + two[2:9] + [
        one[10].split(") ", 1)[1], "(APIServer_1 pid=2) " + one[11].split(") ", 1)[1]] + two[9:] + one[12:]
    assert parse_cudagraph_metrics("".join(mixed), "log") == {3: 240, 5: 40, 700: 2, 7: 1}


def test_rows_a_broken_line_would_drop_are_an_error_never_missing():
    lines = _record("(APIServer pid=1) ", "04", TABLE)
    row = lines[11]  # another process's output inside a row (an 8 KiB buffer flushed mid-line)
    broken = lines[:11] + [row[:60] + "(EngineCore_DP0 pid=42) INFO 12-02 16:51:04 [core.py:1] x\n", row[60:]] + lines[12:]
    with pytest.raises(GraphbenchError, match="log:12: a cudagraph-metrics row broken by other output"):
        parse_cudagraph_metrics("".join(broken), "log")
    second = _record("", "09", TABLE)  # a row whose line lost the table's header (garbled): named, not dropped
    garbled = _record("", "04", TABLE) + second[:7] + [second[7].replace("Tokens | Padded", "Tok\nens | Padded")] + second[8:]
    with pytest.raises(GraphbenchError, match="log:25: a cudagraph-metrics row whose table's header, line 23, was broken"):
        parse_cudagraph_metrics("".join(garbled), "log")
    # the file's first table so garbled is named too (its rows had no table before them to be outside of)
    first = second[:7] + [second[7].replace("Tokens | Padded", "Tok(EngineCore_DP0 pid=7) INFO 12-02 x\nens | Padded")]
    with pytest.raises(GraphbenchError, match="log:11: .* header, line 9, was broken by another writer's output"):
        parse_cudagraph_metrics("".join(first + second[8:]), "log")
    stray = _record("", "04", TABLE)  # a row where no table began or was announced: the rest of a table before it
    assert parse_cudagraph_metrics("".join(stray[10:] + stray), "log") == {3: 120, 5: 40, 700: 2, 7: 1}


def test_data_parallel_tables_of_one_process_and_two_processes_in_one_second_are_each_counted_once():
    # one API server's per-engine stat loggers log their tables one after the other, often in one second
    # (one record prefix); two API servers' tables, in one second, interleave line by line
    dp = _record("(APIServer pid=1) ", "04", TABLE) + _record("(APIServer pid=1) ", "04", TABLE[:-3])
    assert parse_cudagraph_metrics("".join(dp), "log") == {3: 240, 5: 40, 700: 2, 7: 1}
    a, b = _record("(APIServer pid=1) ", "04", TABLE), _record("(APIServer_1 pid=2) ", "04", TABLE[:-2])
    both = [line for pair in zip(a, b) for line in pair] + a[len(b):]
    assert parse_cudagraph_metrics("".join(both), "log") == {3: 240, 5: 80, 700: 2, 7: 1}


_HEAD = "| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |"
_SEP = "|-----------------|---------------|--------------|--------------|-------|"
_PREFIX = "INFO 12-02 16:51:04 [loggers.py:257] "


def _lines(prefix: str, rows: list[str]) -> list[str]:
    # one record as NewLineFormatter writes it: the prefix on every line, "\r\n" inside, a last line of the prefix
    return [prefix + text + "\r\n" for text in [_HEAD, _SEP, *rows]] + [prefix + "\n"]


def _row(unpadded: int, padded: int, count: int) -> str:
    return f"| {unpadded:<15} | {padded:<13} | {padded - unpadded:<12} | FULL         | {count:<5} |"


def test_tables_alike_of_processes_told_apart_by_their_sources():
    # records of one second from a tagged and an untagged process, and from two compose containers (each
    # container's column on every line): each line goes to its own source's table (found by a differential
    # test against the reader that followed the process tag alone)
    a, b = _lines("(APIServer pid=1) " + _PREFIX, [_row(7, 8, 2)]), _lines(_PREFIX, [_row(3, 4, 5)])
    assert parse_cudagraph_metrics("".join([a[0], *b, *a[1:]]), "log") == {3: 5, 7: 2}
    for tag in ("", "(APIServer pid=1) "):
        a = _lines("vllm-a-1  | " + tag + _PREFIX, [_row(7, 8, 2)])
        b = _lines("vllm-b-1  | " + tag + _PREFIX, [_row(3, 4, 5)])
        assert parse_cudagraph_metrics("".join([*a[:2], *b, *a[2:]]), "log") == {3: 5, 7: 2}, tag
    # another container's line of the same prefix, inside a table, neither ends it nor is counted
    a = _lines("vllm-a-1  | (APIServer pid=1) " + _PREFIX, [_row(7, 8, 2), _row(9, 16, 3)])
    assert parse_cudagraph_metrics("".join([*a[:3], "vllm-b-1  | " + _PREFIX + "\n", *a[3:]]), "log") == {7: 2, 9: 3}


def test_another_records_lines_of_the_same_prefix_inside_a_table_are_not_its_rows():
    a = _lines("(APIServer pid=1) " + _PREFIX, [_row(7, 8, 2)])
    other = [_PREFIX + "| Batch | Latency (ms) |\r\n", _PREFIX + "|---|---|\r\n", _PREFIX + "\n"]
    assert parse_cudagraph_metrics("".join([*a[:2], other[0], *a[2:], *other[1:]]), "log") == {7: 2}
    b = _lines(_PREFIX, [_row(3, 4, 5)])
    stats = "(EngineCore_DP0 pid=9) " + _PREFIX + "**Engine Stats:**\r\n"
    assert parse_cudagraph_metrics("".join([*b[:2], stats, *b[2:]]), "log") == {3: 5}


@pytest.mark.parametrize("tag", ["", "(APIServer pid=1) "])
def test_a_formatter_writing_the_prefix_on_a_records_first_line_alone(tag):
    # a logging config of one's own: the header line carries the prefix, the rows do not (read by process tag)
    text = tag + _PREFIX + _HEAD + "\n" + tag + _SEP + "\n" + tag + _row(3, 4, 5) + "\n" + tag + "\n"
    assert parse_cudagraph_metrics(text, "log") == {3: 5}


def test_a_formatter_without_the_prefix_on_rows_keeps_rows_after_another_writers_line():
    # the rows carry no prefix, so a C library's untagged line inside the table is told apart by its shape only:
    # the rows after it are the table's, not dropped (a custom VLLM_LOGGING_CONFIG_PATH formatter)
    rows = [_row(3, 4, 5) + "\n", "[W1130 10:05:00.123 ProcessGroupNCCL.cpp:1250] Warning: something\n",
            _row(7, 8, 2) + "\n"]
    text = "2025-11-30 10:05:00,123 - vllm - INFO - " + _HEAD + "\n" + _SEP + "\n" + "".join(rows) + "\n"
    assert parse_cudagraph_metrics(text, "log") == {3: 5, 7: 2}
    # a new record of the process between them forgets the table: a row after it is no longer its
    record = text.replace("Warning: something", "x\n2025-11-30 10:05:01,000 - vllm - INFO - next record")
    assert parse_cudagraph_metrics(record, "log") == {3: 5}


def test_what_a_log_read_used_and_left_out_is_said(tmp_path):
    from graphbench.ladders.vllm_log import read_server_log

    text = LOG.read_text()
    lines = text.splitlines(keepends=True)
    head = next(i for i, line in enumerate(lines) if "Unpadded Tokens" in line)
    log = tmp_path / "server.log"  # begun inside a table (rotated) and cut inside another (copied mid-write)
    log.write_text("".join(lines[head + 2:head + 4]) + text + "".join(lines[:head + 3]))
    read = read_server_log(log)
    assert (read.tables, read.cut_off, read.rows_before) == (2, 1, 2)
    assert read.summary() == ("2 cudagraph-metrics tables, 200 steps; 1 table the file ends inside left out; 2 rows "
                              "before the first table's header left out (the log begins inside a table)")
    assert load_distribution(log).source == f"{log}: {read.summary()}"
    restarted = tmp_path / "restarted.log"  # two servers' settings: summed, with a warning
    restarted.write_text(text + text.replace("[1, 2, 4, 8, 16]", "[1, 2, 4, 8, 16, 32]"))
    out = CliRunner().invoke(app, ["tune", "--from", str(restarted), "--max-graphs", "2"])
    assert out.exit_code == 0, out.output
    assert "announce 2 different capture ladders" in out.stderr and "4 cudagraph-metrics tables, 400 steps" in out.stdout


@pytest.mark.parametrize("line, server", [
    ("[2025-11-30 10:05:01 TP0] Decode batch. #running-req: 16, #token: 4096, token usage: 0.05, cuda graph: True, "
     "gen throughput (token/s): 1200.55, #queue-req: 0", "SGLang"),
    ("[TensorRT-LLM][INFO] iter = 120, global_step = 120, num_scheduled_requests = 16", "TensorRT-LLM"),
])
def test_another_servers_log_is_named_not_parsed_as_json(tmp_path, line, server):
    log = tmp_path / "server.log"
    log.write_text(line + "\n" + line + "\n")
    with pytest.raises(GraphbenchError, match=f"server.log: {server}'s server log: graphbench reads .* only"):
        load_distribution(log)
    out = CliRunner().invoke(app, ["tune", "--from", str(log)])
    assert out.exit_code == 2 and f"{server}'s server log" in out.stderr


@pytest.mark.parametrize("magic, name", [(b"\xfd7zXZ\x00", "xz"), (b"BZh91AY&SY", "bzip2"), (b"\x28\xb5\x2f\xfd\x00", "zstd")])
def test_a_log_in_a_compression_other_than_gzip_is_named(tmp_path, magic, name):
    packed = tmp_path / "server.log.x"
    packed.write_bytes(magic + bytes(range(128, 256)))
    with pytest.raises(GraphbenchError, match=f"server.log.x: {name}-compressed: decompress it"):
        load_distribution(packed)
