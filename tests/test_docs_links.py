"""The documents reference only what the repository holds: every relative markdown link's file, every
anchor into a markdown file (GitHub's heading slugs), and every raw-results path `benchmarks/results/...`
that RESULTS, the README and docs/ cite."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@functools.cache
def heading_anchors(document: Path) -> frozenset[str]:
    """The anchors of a markdown file's headings (read once, however many links point into it)."""
    anchors, seen = set(), {}
    for line in _prose(document.read_text()).splitlines():
        match = re.match(r"^#{1,6}\s+(.*)", line)
        if match:
            slug = github_slug(match.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(anchors)


def _prose(text: str) -> str:
    """The text without fenced code blocks (their `#` lines are comments, their brackets code)."""
    return re.sub(r"```.*?```", "", text, flags=re.S)


def broken_references(document: Path, root: Path = ROOT) -> list[str]:
    text = _prose(document.read_text())
    broken = []
    for match in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", re.sub(r"`[^`\n]*`", "", text)):  # not in `code`
        target = match.group(1)
        if re.match(r"[a-z]+:", target):  # a web address, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = document.parent / path if path else document
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.resolve()):
            broken.append(f"{target}: no such heading")
    for match in re.finditer(r"`(benchmarks/results/[^`\s]+)`", text):
        cited = match.group(1).rstrip("/")
        if not any(root.glob(cited)):  # a folder, a file or a glob of files
            broken.append(f"{cited}: no such raw result")
    return broken


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_reference_resolves(document):
    assert broken_references(document) == []


def test_the_check_finds_a_missing_file_anchor_and_raw_result(tmp_path):
    (tmp_path / "other.md").write_text("# A heading, with `code` (and parens)\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[ok](other.md#a-heading-with-code-and-parens) [gone](nothing.md) [bad](other.md#elsewhere)\n"
                   "`benchmarks/results/no-such-run/` and `x[i](...)` in code\n```\n[fenced](missing.md)\n```\n")
    assert broken_references(doc, root=tmp_path) == ["nothing.md: no such file", "other.md#elsewhere: no such heading",
                                                     "benchmarks/results/no-such-run: no such raw result"]
