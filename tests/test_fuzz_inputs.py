"""Fuzzing config files and CLI arguments: bad input is a one-line error and exit code 2, never a traceback."""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from graphbench.bench.sweep import _toml_value
from graphbench.cli.main import app
from graphbench.config.engine import SECTIONS, load_engine_config
from graphbench.errors import GraphbenchError

runner = CliRunner()
TRIED = {"config": 0, "cli": 0}

VALUES = st.one_of(
    st.integers(min_value=-5, max_value=5000), st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(), st.text(max_size=12), st.lists(st.integers(min_value=-3, max_value=600), max_size=6),
    st.sampled_from(["NONE", "FULL", "PIECEWISE", "FULL_AND_PIECEWISE", "interactivity", "default", "compile",
                     "none", "bfloat16", "tiny-llama", "auto", "cpu", "triton", "decode<=8"]),
)
FIELDS = [(s, f.name) for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
KEYS = st.one_of(st.sampled_from(FIELDS), st.tuples(st.sampled_from(list(SECTIONS) + ["schedular", "x"]),
                                                       st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.lists(st.tuples(KEYS, VALUES), max_size=6), level=st.one_of(st.none(), st.integers(-2, 6)))
def test_config_files(tmp_path_factory, entries, level):
    TRIED["config"] += 1
    sections: dict[str, dict] = {}
    for (section, key), value in entries:
        sections.setdefault(section, {})[key] = value
    lines = [] if level is None else [f"optimization_level = {level}"]
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in values.items()]
    path = tmp_path_factory.mktemp("fuzz") / "c.toml"
    path.write_text("\n".join(lines) + "\n")
    try:
        load_engine_config(path).resolve()
    except GraphbenchError as exc:
        assert "\n" not in str(exc).strip()


LADDER_ARGS = st.lists(st.one_of(
    st.tuples(st.sampled_from(["--max-num-seqs", "--num-speculative-tokens", "--max-num-batched-tokens",
                               "--max-capture-size"]), st.integers(-3, 3000).map(str)),
    st.tuples(st.just("--capture-sizes"), st.lists(st.integers(-2, 700), min_size=1, max_size=5).map(lambda v: ",".join(map(str, v)))),
    st.tuples(st.just("--performance-mode"), st.sampled_from(["default", "interactivity", "fast", ""])),
    st.tuples(st.just("--batches"), st.sampled_from(["1,2", "0", "x", "5,600"])),
    st.tuples(st.just("--format"), st.sampled_from(["table", "json", "csv", "xml"])),
    st.tuples(st.sampled_from(["--max-num-seqs", "--bogus-flag", "--capture-sizes"]), st.sampled_from(["abc", "1.5", "", "-"])),
), max_size=4)


@settings(max_examples=150, deadline=None)
@given(args=LADDER_ARGS)
def test_ladder_cli_arguments(args):
    TRIED["cli"] += 1
    flat = [x for pair in args for x in pair]
    result = runner.invoke(app, ["ladder", *flat])
    assert result.exit_code in (0, 2), (flat, result.output)
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), (flat, result.stderr)


def test_report_inputs_tried():
    # runs last in this module: says how many inputs the fuzzers tried
    print(f"\nfuzz inputs tried: {TRIED['config']} config files, {TRIED['cli']} ladder command lines")
    assert TRIED["config"] >= 300 and TRIED["cli"] >= 150
