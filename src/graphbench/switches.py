"""The GRAPHBENCH_* environment switches: one registry of names and defaults (no torch import).

Each module reads its switch through `switch_value`, so an unregistered name fails loudly, and result
files record the switches that differ from their default (`changed_switches`). An A/B pair of results
then says which side ran with what, and a switch set to its own default changes nothing on record.
The README's "Environment switches" table documents the same names and defaults (a test checks it).
"""

from __future__ import annotations

from collections.abc import Mapping

from graphbench import env
from graphbench.errors import GraphbenchError

SWITCH_DEFAULTS: dict[str, str] = {
    "GRAPHBENCH_GEMV": "1",
    "GRAPHBENCH_SKINNY_GEMM": "1",
    "GRAPHBENCH_DECODE_WRITES_KV": "1",
    "GRAPHBENCH_DECODE_MERGE_IN_KERNEL": "1",
    "GRAPHBENCH_DECODE_MIN_TILES": "1",
    "GRAPHBENCH_DECODE_EARLY_LOADS": "1",
    "GRAPHBENCH_NORM_EARLY_LOADS": "1",
    "GRAPHBENCH_DECODE_ROTARY": "1",
    "GRAPHBENCH_PDL": "1",
    "GRAPHBENCH_DIRECT_LAUNCH": "1",
    "GRAPHBENCH_CHECK_GRAPH_INPUTS": "0",
    "GRAPHBENCH_TRACED_PIECES": "1",
    "GRAPHBENCH_TRITON_KEY_CACHE": "1",
    "GRAPHBENCH_PACKED_INPUTS": "1",
    "GRAPHBENCH_GATED_SKINNY": "1",
    "GRAPHBENCH_GATED_GEMV": "1",
}


def _accepts(name: str) -> str:
    """What a switch accepts, in words: a count, or the two values of an on/off switch."""
    return "a whole number >= 1" if name == "GRAPHBENCH_DECODE_MIN_TILES" else "0 or 1"


def switch_value(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The switch's value in the environment, else its registered default (KeyError: not a switch);
    GraphbenchError for a value it does not accept (a typo must not run as a silent default)."""
    text = env.value(name, SWITCH_DEFAULTS[name], environ)
    ok = text.isdigit() and int(text) >= 1 if name == "GRAPHBENCH_DECODE_MIN_TILES" else text in ("0", "1")
    if not ok:
        raise GraphbenchError(f"{name}={text!r}: expected {_accepts(name)} (default {SWITCH_DEFAULTS[name]})")
    return text


def changed_switches(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The registered switches whose value differs from the default, sorted by name."""
    return {name: value for name in sorted(SWITCH_DEFAULTS)
            if (value := switch_value(name, environ)) != SWITCH_DEFAULTS[name]}


def switches_text(value: object) -> str:
    """A result's recorded switches as 'A=0 B=1', sorted ('' when none; a hand-edited non-dict as written)."""
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in sorted(value.items()))
    return str(value) if value else ""
