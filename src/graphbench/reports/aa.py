"""An A/A check: the same grid measured twice, interleaved; every verdict between the copies is a false
alarm. The number a user needs before trusting a verdict on their machine (no torch)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphbench.reports.compare import compare_sets
from graphbench.reports.compare_match import load_side
from graphbench.reports.gate import blind_passes, run_gate
from graphbench.reports.verdict import IMPROVED, NA, REGRESSED, TIE


@dataclass
class AACheck:
    comparisons: int
    compare_counts: dict[str, int]
    gate_checks: int
    gate_counts: dict[str, int]
    gate_exit: int
    alarms: list[str] = field(default_factory=list)
    blind_checks: int = 0  # gate passes whose noise is wider than their threshold: they could not have failed

    @property
    def false_alarms(self) -> int:
        """compare's called differences plus gate's regressions, between identical configurations."""
        return self.compare_counts[IMPROVED] + self.compare_counts[REGRESSED] + self.gate_counts.get("regressed", 0)

    def summary(self) -> str:
        c = self.compare_counts
        gate = ", ".join(f"{n} {s}" for s, n in self.gate_counts.items() if n)
        blind = (f"; {self.blind_checks} of them spread more than their threshold between processes (a regression "
                 "of that size would pass them too)") if self.blind_checks else ""
        return (f"{self.false_alarms} false alarm(s). compare: {c[REGRESSED]} regressed, {c[IMPROVED]} improved, "
                f"{c[TIE]} ties, {c[NA]} n/a of {self.comparisons}; gate: exit {self.gate_exit}, {gate} of "
                f"{self.gate_checks} checks{blind}")

    def to_dict(self) -> dict[str, Any]:
        return {"false_alarms": self.false_alarms, "comparisons": self.comparisons, "compare": self.compare_counts,
                "gate_checks": self.gate_checks, "gate": self.gate_counts, "gate_exit": self.gate_exit,
                "blind_checks": self.blind_checks, "alarms": self.alarms}


def aa_check(a: str | Path, b: str | Path) -> AACheck:
    """compare and gate between two result folders that measured the same configurations."""
    base, _ = load_side(a, "baseline")
    cur, _ = load_side(b, "current")
    result = compare_sets(base, cur)
    counts = {v: 0 for v in (IMPROVED, REGRESSED, TIE, NA)}
    alarms = []
    for c in result.comparisons:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
        if c.verdict in (IMPROVED, REGRESSED):
            alarms.append(f"compare {c.verdict}: {c.where} {c.metric}: {c.note}")
    report = run_gate(a, b, allow_missing=True)
    alarms += [f"gate regressed: {r.comparison.where} {r.metric}: {r.reason}" for r in report.regressions]
    return AACheck(len(result.comparisons), counts, len(report.checks), report.counts(), report.exit_code, alarms,
                   len(blind_passes(report.checks)))
