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


def time_verdict(base_ms: list[float], variant_ms: list[float], metric: str) -> dict:
    """Whether a variant's time differs from its base's, by the rule every comparison of graphbench uses
    (reports/verdict.py: over per-process samples, significant, beyond twice the larger range between the
    processes of either side, at least the metric's minimum effect): {"verdict": faster | slower | tie | n/a,
    "change_pct", "reason"}. Fewer than 3 processes a side give n/a: run the A/B with --rounds 3 or more."""
    from graphbench.reports.gate_thresholds import min_effect_pct
    from graphbench.reports.verdict import MIN_PROCESSES, judge

    if min(len(base_ms), len(variant_ms)) < MIN_PROCESSES:  # (judge tests 1 process against 3 or more, a
        # history's rule; a side of an A/B left with one process, the others failed, is the host noise itself)
        return {"verdict": "n/a", "change_pct": None,
                "reason": f"{len(base_ms)} vs {len(variant_ms)} processes (>= {MIN_PROCESSES} a side)"}
    v = judge(base_ms, variant_ms, higher_is_better=False, min_effect_pct=min_effect_pct(metric))
    word = {"improved": "faster", "regressed": "slower"}.get(v.verdict, v.verdict)
    return {"verdict": word, "change_pct": v.change_pct, "reason": v.reason}
