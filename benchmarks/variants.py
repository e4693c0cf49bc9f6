"""A/B sides of a benchmark script given as environment variables: `--variant NAME=VAR=VALUE[,VAR=VALUE]`
(benchmarks/decode.py, benchmarks/startup.py): each side runs in a process of its own with those variables set."""

from __future__ import annotations


def parse_variants(specs: list[str]) -> dict[str, dict[str, str]]:
    """["kv=A=1,B=0"] -> {"kv": {"A": "1", "B": "0"}}; SystemExit with the expected form otherwise."""
    variants = {}
    for spec in specs:
        name, _, assignments = spec.partition("=")
        pairs = [a.partition("=") for a in assignments.split(",") if a]
        if not name or not pairs or any(not var or sep != "=" for var, sep, _ in pairs):
            raise SystemExit(f"--variant {spec!r}: expected NAME=VAR=VALUE[,VAR=VALUE]")
        variants[name] = {var: value for var, _, value in pairs}
    return variants
