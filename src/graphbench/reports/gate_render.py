"""Gate output for CI: the Markdown job summary and the JUnit XML of a gate report, and of a gate
that could not run (unusable input, exit code 2). No torch."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

from graphbench.reports.compare_format import format_change, format_p, format_value
from graphbench.reports.gate_thresholds import threshold_text
from graphbench.reports.safe_text import markdown_text

if TYPE_CHECKING:
    from graphbench.reports.gate import GateReport


def _md(text: Any) -> str:
    return markdown_text(text)


def gate_markdown(report: GateReport) -> str:
    """A CI job summary: the verdict first, regressions, warnings, then a table of every check."""
    icon = "✅" if report.passed else "❌"
    lines = [f"## {icon} graphbench gate: {report.headline()}", ""]
    lines.append(
        f"Baseline: {_md(', '.join(report.baseline_paths))} · current: {_md(', '.join(report.current_paths))}. "
        f"A metric regresses only when its change is beyond its threshold in the bad direction **and** "
        f"statistically significant over the repeats (two-sided Mann–Whitney U, p < {report.alpha:g}); "
        f"per-point metrics (one value per point: start-up, capture, graph memory) are "
        f"**threshold-only**.")
    lines.append("")
    if report.regressions:
        lines.append("### Regressions")
        lines.append("")
        for r in report.regressions:
            c = r.comparison
            lines.append(
                f"- **{_md(c.where)}** `{c.metric}`: {format_value(c.baseline_median, c.unit)} → "
                f"{format_value(c.current_median, c.unit)}: {r.reason}")
        lines.append("")
    if report.warnings:
        lines.append("### Warnings")
        lines.append("")
        lines += [f"- ⚠️ {_md(w)}" for w in report.warnings]
        lines.append("")
    lines.append("| status | point | workload | metric | baseline | current | change | p | n | threshold | rule |")
    lines.append("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    icons = {"regressed": "❌ regressed", "improved": "🟢 improved", "pass": "✅ pass",
             "untestable": "⚠️ untestable"}
    for r in report.checks:
        c = r.comparison
        lines.append(
            f"| {icons[r.status]} | {_md(c.point)} | {_md(c.workload or '—')} | `{c.metric}` | "
            f"{format_value(c.baseline_median, c.unit)} | {format_value(c.current_median, c.unit)} | "
            f"{format_change(c.change_pct)} | {format_p(c.p_value)} | {c.n_baseline}/{c.n_current} | "
            f"{threshold_text(r.threshold_pct)} | {r.rule} |")
    lines.append("")
    return "\n".join(lines)


def gate_junit(report: GateReport) -> str:
    """JUnit XML: one testcase per check; regressions are failures, untestable checks are skipped."""
    n = report.counts()
    suites = ET.Element("testsuites", name="graphbench-gate", tests=str(len(report.checks)),
                        failures=str(n["regressed"]), errors="0", skipped=str(n["untestable"]))
    suite = ET.SubElement(suites, "testsuite", name="graphbench-gate", tests=str(len(report.checks)),
                          failures=str(n["regressed"]), errors="0", skipped=str(n["untestable"]), time="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", report.verdict), ("alpha", f"{report.alpha:g}"),
                        ("allow_mismatch", str(report.allow_mismatch).lower()),
                        *((f"threshold.{k}", threshold_text(v)) for k, v in report.thresholds.items())):
        ET.SubElement(props, "property", name=name, value=value)
    for r in report.checks:
        c = r.comparison
        case = ET.SubElement(suite, "testcase", classname=f"graphbench.gate.{c.label}.{c.system}",
                             name=r.testcase_name, time="0")
        detail = (f"{c.where} {c.metric}: baseline {format_value(c.baseline_median, c.unit)} "
                  f"(n={c.n_baseline}), current {format_value(c.current_median, c.unit)} (n={c.n_current}), "
                  f"change {format_change(c.change_pct)}, p={format_p(c.p_value)}, "
                  f"threshold {threshold_text(r.threshold_pct)}, rule {r.rule}: {r.reason}")
        if r.status == "regressed":
            failure = ET.SubElement(case, "failure", message=f"regressed: {r.reason}", type="regression")
            failure.text = detail
        else:
            if r.status == "untestable":
                ET.SubElement(case, "skipped", message=r.reason)
            ET.SubElement(case, "system-out").text = detail
    if report.warnings:
        ET.SubElement(suite, "system-err").text = "\n".join(report.warnings)
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def error_markdown(message: str) -> str:
    """The job summary written when the gate cannot run (exit code 2)."""
    return f"## ⚠️ graphbench gate: ERROR (unusable input)\n\n{_md(message)}\n"


def error_junit(message: str) -> str:
    suites = ET.Element("testsuites", name="graphbench-gate", tests="1", failures="0", errors="1")
    suite = ET.SubElement(suites, "testsuite", name="graphbench-gate", tests="1", failures="0", errors="1",
                          skipped="0", time="0")
    case = ET.SubElement(suite, "testcase", classname="graphbench.gate", name="input", time="0")
    ET.SubElement(case, "error", message=message, type="unusable-input").text = message
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
