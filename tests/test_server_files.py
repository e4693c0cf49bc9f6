"""What real servers write, read as they write it: vLLM `--cudagraph-metrics` logs (each table one log record,
its prefix on every line, process tags, a tty's line ends, docker's column, output interleaved or cut off,
gzip), `vllm bench serve --save-result --save-detailed` results, and distribution files.

The logs are built the way vLLM builds them, so each test reads the bytes a server writes:
CUDAGraphLogging.generate_metric_table (vllm/compilation/cuda_graph.py: settings lines, then a table whose
cells are left-justified to the widest, rows by count, the message ending in a newline), NewLineFormatter
(vllm/logging_utils/formatter.py: the record's prefix repeated after each "\\r\\n") and _add_prefix
(vllm/utils/system_utils.py: a subprocess's coloured tag before each line it writes), as in the log of
vllm-project/vllm#29825, the PR that added --cudagraph-metrics.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.errors import GraphbenchError
from graphbench.ladders.distributions import load_distribution
from graphbench.ladders.request_trace import parse_request_trace
from graphbench.ladders.vllm_log import parse_cudagraph_metrics

BENCH = Path(__file__).parent / "data" / "vllm" / "bench-serve-detailed.json"
HEADERS = ["Unpadded Tokens", "Padded Tokens", "Num Paddings", "Runtime Mode", "Count"]
PREFIX = "INFO 12-02 16:51:04 [cuda_graph.py:118] "
STATS = "INFO 12-02 16:51:14 [loggers.py:257] Engine 000: Avg prompt throughput: 10.0 tokens/s\n"
ONE = {(3, 4, "FULL"): 120, (5, 8, "FULL"): 40, (700, 700, "NONE"): 2}
TWO = {(3, 4, "PIECEWISE"): 30, (16, 16, "FULL"): 8}


def metric_table(stats: dict[tuple[int, int, str], int]) -> str:
    rows = [[str(u), str(p), str(p - u), mode, str(c)]
            for (u, p, mode), c in sorted(stats.items(), key=lambda kv: kv[1], reverse=True)]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADERS)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return ("**CUDAGraph Config Settings:**\n\n- Mode: FULL_AND_PIECEWISE\n- Capture sizes: [1, 2, 4, 8, 16]\n\n"
            "**CUDAGraph Stats:**\n\n" + line(HEADERS) + "\n|" + "|".join("-" * (w + 2) for w in widths) + "|\n"
            + "\n".join(map(line, rows)) + "\n")


def record(message: str, prefix: str = PREFIX) -> str:
    return prefix + message.replace("\n", "\r\n" + prefix) + "\n"


def tagged(text: str, tag: str) -> str:
    return "".join(f"\x1b[1;36m({tag})\x1b[0;0m " + line for line in text.splitlines(keepends=True))


LOG = STATS + record(metric_table(ONE)) + STATS + record(metric_table(TWO)) + STATS
BOTH = {3: 150, 5: 40, 700: 2, 16: 8}
FIRST = {3: 120, 5: 40, 700: 2}


def test_the_log_vllm_writes_is_read_whole():
    assert parse_cudagraph_metrics(LOG, "log") == BOTH
    assert parse_cudagraph_metrics(tagged(LOG, "APIServer pid=1"), "log") == BOTH


def test_docker_compose_column_and_tty_line_ends():
    # `docker compose logs` puts "name  | " before every line (a '|' ahead of the table); a container run
    # with a tty turns each "\n" into "\r\n", so vLLM's own "\r\n" inside a record becomes "\r\r\n"
    compose = "".join("vllm-1  | " + line for line in LOG.splitlines(keepends=True))
    assert parse_cudagraph_metrics(compose, "log") == BOTH
    assert parse_cudagraph_metrics(tagged(LOG, "APIServer pid=1").replace("\n", "\r\n"), "log") == BOTH


def test_processes_interleaving_line_by_line_are_each_read_whole():
    # two API servers (data parallel, one per rank) writing to one terminal: B's closing line (its record's
    # last) falls between A's rows, and ends only B's table
    a = tagged(record(metric_table(ONE)), "APIServer_0 pid=10").splitlines(keepends=True)
    b = tagged(record(metric_table({(9, 16, "FULL"): 7})), "APIServer_1 pid=11").splitlines(keepends=True)
    mixed = "".join(line for pair in itertools.zip_longest(a, b) for line in pair if line)
    assert parse_cudagraph_metrics(mixed, "log") == {**FIRST, 9: 7}


ROW = LOG.rindex(PREFIX + "| 16 ") + len(PREFIX)  # the second table's last row, past its prefix


@pytest.mark.parametrize("end", [ROW + 4, ROW + 19, ROW + 22, ROW - len(PREFIX)])
def test_a_table_the_file_ends_inside_is_left_out(end):
    # the log copied while vLLM wrote it: mid-cell, at a cell's end, mid-row, or between rows (whole lines,
    # the later rows and vLLM's closing line lost): the cut table's rows are not all there
    assert parse_cudagraph_metrics(LOG[:end], "log") == FIRST
    only = LOG[LOG.rindex(PREFIX + "**CUDAGraph Config"):end]
    with pytest.raises(GraphbenchError, match=r"log:\d+: (the only cudagraph-metrics table with steps is cut off|"
                                              "a cudagraph-metrics row cut short)"):
        parse_cudagraph_metrics(only, "log")


def test_another_markdown_table_after_ours_ends_it():
    text = "\n".join(["| " + " | ".join(HEADERS) + " |", "|---|---|---|---|---|", "| 3 | 4 | 1 | FULL | 2 |",
                      "| Metric | Value |", "|---|---|", "| a | 1 |", ""])
    assert parse_cudagraph_metrics(text, "log") == {3: 2}


def test_every_cudagraph_mode_name_is_a_mode():
    # CUDAGraphMode (vllm/config/compilation.py) names; the count is the same whatever the mode cell says
    rows = {(3, 4, "FULL_AND_PIECEWISE"): 5, (8, 8, "CUDAGraphMode.FULL_DECODE_ONLY"): 1}
    assert parse_cudagraph_metrics(record(metric_table(rows)) + STATS, "log") == {3: 5, 8: 1}


def test_gzip_logs_and_cut_utf8_are_read(tmp_path):
    log = tmp_path / "vllm.log.gz"
    log.write_bytes(gzip.compress(tagged(LOG, "APIServer pid=1").encode()))
    assert dict(load_distribution(log)) == pytest.approx({k: v / 200 for k, v in BOTH.items()})
    out = CliRunner().invoke(app, ["tune", "--from", str(log), "--max-graphs", "2", "--emit", "vllm"])
    assert out.exit_code == 0 and '"cudagraph_capture_sizes": [5, 16]' in out.stdout  # the log's top 16
    # `tail -c` of a log: a progress bar's "█" (3 bytes in UTF-8) cut at the first byte
    cut = tmp_path / "tail.log"
    cut.write_bytes("█ 67/67 [00:03<00:00]\n".encode()[1:] + LOG.encode())
    assert load_distribution(cut).sizes == (3, 5, 16, 700)
    other = tmp_path / "sizes.csv.gz"
    other.write_bytes(gzip.compress(b"batch_size,count\n3,4\n"))
    with pytest.raises(GraphbenchError, match=r"sizes\.csv\.gz: gzip-compressed, and not a vLLM log"):
        load_distribution(other)


def test_a_damaged_gzip_log_says_how_to_keep_its_readable_part(tmp_path):
    packed = gzip.compress(tagged(LOG, "APIServer pid=1").encode())
    cut, corrupt = tmp_path / "cut.log.gz", tmp_path / "corrupt.log.gz"
    cut.write_bytes(packed[: len(packed) // 2])  # a copy cut short
    corrupt.write_bytes(packed[:-8] + bytes(8))  # a wrong CRC and length
    for log in (cut, corrupt):
        out = CliRunner().invoke(app, ["tune", "--from", str(log)])
        assert out.exit_code == 2 and "the gzip file is damaged" in out.output and f"gzip -dc {log}" in out.output


def test_a_server_log_without_tables_asks_for_the_flag(tmp_path):
    log = tmp_path / "vllm.log"
    log.write_text(tagged(STATS * 3, "APIServer pid=1"))
    with pytest.raises(GraphbenchError, match="no cudagraph-metrics table.*--cudagraph-metrics"):
        load_distribution(log)
    out = CliRunner().invoke(app, ["tune", "--from", str(log), "--max-graphs", "2"])
    assert out.exit_code == 2 and "--cudagraph-metrics" in out.stderr


def bench(**changes) -> str:
    data = json.loads(BENCH.read_text())
    return json.dumps({**data, **changes})


PRETTY = json.dumps(json.loads(BENCH.read_text()), indent=1).replace('"failed": 1', '"failed": 1,,')


@pytest.mark.parametrize("text, match", [
    # serve.py refuses --request-rate with ramp-up and saves request_rate "inf": not "all at once"
    (bench(ramp_up_strategy="linear", ramp_up_start_rps=1, ramp_up_end_rps=10), "a ramp-up run"),
    # serve.py's pooling (embedding) result: input_lens, no output_lens; --save-detailed would not help
    (json.dumps({k: v for k, v in json.loads(bench()).items() if k != "output_lens"}), "pooling or embedding"),
    (bench(request_rate=10**400), "key request_rate must be a positive number"),
    (bench(itls=[[10**400], [], [], []]), r"key itls\[0\] holds"),
    ('[{"input_len": 1' + "0" * 5000 + ', "output_len": 3}]', "x: invalid JSON: Exceeds the limit"),
    (PRETTY, rf"x:{PRETTY[:PRETTY.index(',,')].count(chr(10)) + 1}: invalid JSON"),  # jq-printed, then hand-edited
    (bench() + "\n" + bench()[:200], r"x:2: invalid JSON, cut short"),  # --append-result killed mid-dump
])
def test_bench_serve_results_are_refused_clearly(text, match):
    with pytest.raises(GraphbenchError, match=match):
        parse_request_trace(text, "x")


@pytest.mark.parametrize("content, match", [
    ('{"3": 1' + "0" * 400 + "}", "count of batch size 3 must be a non-negative number"),
    ('{"3": 1' + "0" * 5000 + "}", "invalid JSON: Exceeds the limit"),
])
def test_huge_json_counts_are_errors_not_crashes(tmp_path, content, match):
    path = tmp_path / "d.json"
    path.write_text(content)
    with pytest.raises(GraphbenchError, match=match):
        load_distribution(path)


def test_a_csv_of_size_count_rows_without_header(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("3,120\r\n\r\n5,40.5\r\n")
    assert dict(load_distribution(path)) == pytest.approx({3: 120 / 160.5, 5: 40.5 / 160.5})


def test_a_run_trace_with_an_integer_of_thousands_of_digits_is_one_error(tmp_path):
    """bench/workloads.load_trace (`graphbench run --trace`): Python refuses to convert such an integer (a
    ValueError, not a JSONDecodeError): one line naming the file and line, no traceback."""
    from graphbench.bench.workloads import load_trace

    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"arrival_s": 0, "prompt_len": 8, "output_len": 4}\n'
                     '{"arrival_s": 1, "prompt_len": ' + "9" * 5000 + ', "output_len": 4}\n')
    with pytest.raises(GraphbenchError, match=r"trace.jsonl:2: expected arrival_s"):
        load_trace(trace)


def test_a_row_whose_first_cell_is_no_number_is_an_error_not_the_tables_end():
    """A cudagraph-metrics row with a bad first cell (a corrupted byte, a float) names its line; it must not end the
    table and silently drop the rows after it (the 7 steps of size 5 below)."""
    from graphbench.ladders.vllm_log import parse_cudagraph_metrics

    rows = ["| 3 | 4 | 1 | FULL | 2 |", "| {} | 4 | 1 | FULL | 1 |", "| 5 | 8 | 3 | FULL | 7 |"]
    for bad in ("x", "1.5", "", "\ufffd"):
        text = "\n".join(["| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |",
                          "|---|---|---|---|---|", *(r.format(bad) for r in rows), "INFO done", ""])
        with pytest.raises(GraphbenchError, match=r"log:4: a cudagraph-metrics row needs integer tokens"):
            parse_cudagraph_metrics(text, "log")


def test_a_line_longer_than_any_log_line_is_read_past(tmp_path, monkeypatch):
    """A streamed log read holds at most MAX_LINE characters of a line: a longer one (a file of gigabytes without a
    line break) is skipped whole, and the tables around it still count."""
    from graphbench.ladders import log_text, vllm_log

    monkeypatch.setattr(log_text, "MAX_LINE", 128)  # (the header: 75 characters)
    table = ["| Unpadded Tokens | Padded Tokens | Num Paddings | Runtime Mode | Count |", "|---|---|---|---|---|",
             "| 3 | 4 | 1 | FULL | 2 |", "INFO done"]
    log = tmp_path / "server.log"
    log.write_text("\n".join(["x" * 1000, *table, "y" * 200, *table]) + "\n")
    read, seen = vllm_log._Scan.read, []
    monkeypatch.setattr(vllm_log._Scan, "read", lambda scan, lines: read(scan, [seen.append(n) or n for n in lines]))
    assert vllm_log.read_server_log(log).counts == {3: 4}
    assert len(seen) == 2 * len(table) and max(map(len, seen)) <= 128  # the long lines never reached the scan
