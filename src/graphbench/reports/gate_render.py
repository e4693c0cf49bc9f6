"""Gate output for CI: the Markdown job summary and the JUnit XML of a gate report, and of a gate
that could not run (unusable input, exit code 2). No torch."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

from graphbench.reports.compare_format import format_change, format_p, format_value
from graphbench.reports.gate_thresholds import threshold_text
from graphbench.reports.safe_text import markdown_text
from graphbench.reports.verdict import MIN_PROCESSES

if TYPE_CHECKING:
    from graphbench.reports.gate import GateReport


def _md(text: Any) -> str:
    return markdown_text(text)


def _noise(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}%"


def gate_markdown(report: GateReport) -> str:
    """A CI job summary: the verdict first, regressions, warnings, then a table of every check."""
    icon = "❌" if not report.passed else "⚠️" if report.inconclusive else "✅"
    lines = [f"## {icon} graphbench gate: {report.headline()}", ""]
    lines.append(
        f"Baseline: {_md(', '.join(report.baseline_paths))} · current: {_md(', '.join(report.current_paths))}. "
        f"The samples are processes (a sweep's rounds). A metric regresses only when its change is beyond "
        f"its threshold in the bad direction **and** significant over the processes (p < {report.alpha:g}) "
        f"**and** larger than the noise floor (the larger between-process spread of the two sides); one "
        f"the data cannot judge (busy host, fewer than {MIN_PROCESSES} processes a side) is **inconclusive** "
        f"(exit 3).")
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
    lines.append("| status | point | workload | metric | baseline | current | change | noise | p | processes | "
                 "threshold | why |")
    lines.append("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    icons = {"regressed": "❌ regressed", "inconclusive": "⚠️ inconclusive", "improved": "🟢 improved",
             "pass": "✅ pass", "untestable": "⚠️ untestable"}
    for r in report.checks:
        c = r.comparison
        lines.append(
            f"| {icons[r.status]} | {_md(c.point)} | {_md(c.workload or '—')} | `{c.metric}` | "
            f"{format_value(c.baseline_median, c.unit)} | {format_value(c.current_median, c.unit)} | "
            f"{format_change(c.change_pct)} | {_noise(c.noise_pct)} | {format_p(c.p_value)} | "
            f"{c.n_baseline}/{c.n_current} | {threshold_text(r.threshold_pct)} | {_md(r.reason)} |")
    lines.append("")
    return "\n".join(lines)


def gate_junit(report: GateReport) -> str:
    """JUnit XML: one testcase per check; regressions are failures, untestable checks are skipped."""
    n = report.counts()
    suites = ET.Element("testsuites", name="graphbench-gate", tests=str(len(report.checks)),
                        failures=str(n["regressed"]), errors="0", skipped=str(n["untestable"] + n["inconclusive"]))
    suite = ET.SubElement(suites, "testsuite", name="graphbench-gate", tests=str(len(report.checks)),
                          failures=str(n["regressed"]), errors="0", skipped=str(n["untestable"] + n["inconclusive"]), time="0")
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", report.verdict), ("alpha", f"{report.alpha:g}"),
                        ("allow_mismatch", str(report.allow_mismatch).lower()),
                        *((f"threshold.{k}", threshold_text(v)) for k, v in report.thresholds.items())):
        ET.SubElement(props, "property", name=name, value=value)
    for r in report.checks:
        c = r.comparison
        case = ET.SubElement(suite, "testcase", classname=f"graphbench.gate.{c.label}.{c.system}" + (f".{c.gpu}" if c.gpu is not None else ""),
                             name=r.testcase_name, time="0")
        detail = (f"{c.where} {c.metric}: baseline {format_value(c.baseline_median, c.unit)} "
                  f"(n={c.n_baseline}), current {format_value(c.current_median, c.unit)} (n={c.n_current}), "
                  f"change {format_change(c.change_pct)}, noise {_noise(c.noise_pct)}, p={format_p(c.p_value)}, "
                  f"threshold {threshold_text(r.threshold_pct)}, rule {r.rule}: {r.reason}")
        if r.status == "regressed":
            failure = ET.SubElement(case, "failure", message=f"regressed: {r.reason}", type="regression")
            failure.text = detail
        else:
            if r.status in ("untestable", "inconclusive"):
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
