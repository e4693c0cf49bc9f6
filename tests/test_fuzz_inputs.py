"""Fuzzing engine config files in-process: bad input is a one-line GraphbenchError, never another
exception. (Command lines and every input file kind are fuzzed through the CLI in a memory-limited
worker: tests/test_fuzz_commands.py.)"""

from __future__ import annotations

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphbench.bench.sweep_plan import toml_value
from graphbench.config.engine_config import SECTIONS, load_engine_config
from graphbench.errors import GraphbenchError

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
    sections: dict[str, dict] = {}
    for (section, key), value in entries:
        sections.setdefault(section, {})[key] = value
    lines = [] if level is None else [f"optimization_level = {level}"]
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    path = tmp_path_factory.mktemp("fuzz") / "c.toml"
    path.write_text("\n".join(lines) + "\n")
    try:
        load_engine_config(path).resolve()
    except GraphbenchError as exc:
        assert "\n" not in str(exc).strip()
