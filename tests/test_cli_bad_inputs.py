"""Bad inputs the command fuzzers (tests/test_fuzz_commands.py) did not reach, each found by hand: the
GPU-free commands end them in one `error:` line with exit code 2 (or say what they did), never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from graphbench.cli.main import app

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def assert_one_error(result, *words: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exc_info is None or result.exc_info[0] is SystemExit, result.exc_info
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def write_json(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_a_request_rate_too_slow_for_its_latencies_is_an_error_not_an_overflow(tmp_path):
    # request 1 at 1 / 1e-300 / 1e-300 steps: the arrival overflowed to inf in the replay (a traceback)
    trace = write_json(tmp_path / "slow.json", {"input_lens": [10, 20], "output_lens": [5, 5],
                                                "request_rate": 1e-300, "itls": [[1e-300], [1e-300]]})
    assert_one_error(invoke("tune", "--distribution", trace, "--max-graphs", 3),
                     f"{trace}: request_rate 1e-300/s", "too far apart to replay")


def test_an_output_length_past_the_engines_cap_names_the_file_and_key(tmp_path):
    # 2^24 passed the trace's check and failed in the replay as 'max_tokens must be at most 1048576'
    listing = write_json(tmp_path / "long.json", [{"input_len": 10, "output_len": 2_000_000}])
    assert_one_error(invoke("tune", "--from", listing, "--max-graphs", 3),
                     f"{listing}: item 0: output_len must be an integer in 1..1048576, got 2000000")
    bench = write_json(tmp_path / "bench.json", {"input_lens": [10], "output_lens": [1 << 24]})
    assert_one_error(invoke("tune", "--from", bench, "--max-graphs", 3),
                     f"{bench}: output_lens[0] must be an integer in 0..1048576, got 16777216")
