"""reports/variants_table.py: what -O3's compile_sizes variants bought, and its place in the report."""

from __future__ import annotations

import pandas as pd

from graphbench.reports.render import ReportContext, render_html, render_markdown
from graphbench.reports.variants_table import VARIANTS_COLUMNS, variants_table

MEASURED = {"policy": "measured", "note": "", "seconds": 0.3, "sizes": [
    {"size": 1, "static_ms": 0.951, "dynamic_ms": 0.952, "kept": "dynamic"},
    {"size": 2, "static_ms": 1.318, "dynamic_ms": 1.124, "kept": "dynamic"},
    {"size": 4, "static_ms": 1.0, "dynamic_ms": 1.25, "kept": "static"}]}


def _result(label: str, choices: list[dict], system: str = "graphbench", status: str = "ok") -> dict:
    starts = [{"cold": i == 0, "static_variants": c} for i, c in enumerate(choices)]
    return {"label": label, "system": system, "status": status, "startups": starts, "startup": starts[-1]}


def test_one_row_per_start_and_size():
    table = variants_table([_result("O3_default", [MEASURED, MEASURED])])
    assert list(table.columns) == VARIANTS_COLUMNS and len(table) == 6
    assert list(table["start"]) == ["cold"] * 3 + ["warm"] * 3
    two = table.iloc[1]
    assert two["size"] == 2 and two["step with variants ms"] == 1.318 and two["step dynamic ms"] == 1.124
    assert round(two["variants vs dynamic %"], 2) == 17.26 and two["ran"] == "dynamic pieces"
    assert table.iloc[2]["ran"] == "variants" and round(table.iloc[2]["variants vs dynamic %"], 9) == -20.0


def test_unmeasured_points_say_why_and_others_are_left_out():
    always = {"policy": "always", "note": "compilation.static_variants = always", "seconds": 0.0, "sizes": []}
    results = [
        _result("O3_always", [always]),
        _result("O2_default", [{"policy": "none", "note": "", "seconds": 0.0, "sizes": []}]),  # no variants
        {"label": "old", "system": "graphbench", "status": "ok", "startup": {"cold": False}},  # before the choice
        _result("hf-compile", [MEASURED], system="hf-compile"),
        _result("O3_failed", [MEASURED], status="failed"),
    ]
    table = variants_table(results)
    assert table.values.tolist()[0][:3] == ["O3_always", "cold", "all"]
    assert table.iloc[0]["ran"] == "variants, unmeasured (compilation.static_variants = always)"
    assert len(table) == 1


def test_the_report_shows_the_table_only_when_there_are_rows():
    base = dict(title="t", environment="env", counts="1 points ok", headline=pd.DataFrame(), charts=[],
                failures=pd.DataFrame(), skipped=[], summary=pd.DataFrame())
    context = ReportContext(**base, variants=variants_table([_result("O3_default", [MEASURED])]))
    markdown = render_markdown(context)
    assert "## compile_sizes variants: kept where faster" in markdown
    assert "| O3_default | cold | 2 | 1.318 | 1.124 | +17.3 | dynamic pieces |" in markdown
    assert "| O3_default | cold | 4 | 1.000 | 1.250 | -20.0 | variants |" in markdown
    assert "<h2>compile_sizes variants: kept where faster</h2>" in render_html(context)
    assert "compile_sizes variants" not in render_markdown(ReportContext(**base))


def test_sizes_whose_variants_are_the_pieces_get_a_row_saying_so():
    choice = {"policy": "measured", "note": "", "seconds": 0.0, "sizes": [], "piece_sizes": [2, 4, 8]}
    table = variants_table([_result("O3_default", [choice])])
    assert list(table["size"]) == [2, 4, 8] and table["step with variants ms"].isna().all()
    assert set(table["ran"]) == {"the traced pieces: graphbench's kernels run every projection, nothing compiled"}


def test_a_label_on_two_gpu_types_is_named_apart():
    # as every other table of the report (reports/point_names.py): not "O3_default" twice
    h200, a100 = _result("O3_default", [MEASURED]), _result("O3_default", [MEASURED])
    h200["environment"], a100["environment"] = {"gpu": "NVIDIA H200"}, {"gpu": "NVIDIA A100"}
    assert sorted(set(variants_table([h200, a100])["point"])) == ["O3_default @ NVIDIA A100", "O3_default @ NVIDIA H200"]
    assert set(variants_table([h200])["point"]) == {"O3_default"}
