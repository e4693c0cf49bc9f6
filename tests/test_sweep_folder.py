"""One results folder, one model: a sweep of another model into a folder that holds results is refused
(bench/sweep_folder.py), and a report names the model(s) its figures are for."""

from __future__ import annotations

from typer.testing import CliRunner

from graphbench.bench.sweep_folder import check_folder_takes, folder_models
from graphbench.bench.sweep_grid import SweepPoint
from graphbench.cli.main import app
from graphbench.reports.report import write_report
from graphbench.reports.store import load_results, write_result
from tests.test_sweep import FAST, fast

runner = CliRunner()


def _result(model: str, label: str = "O0_default", tokens: float = 1000.0, index: int = 1, sweep_id: str = "s1"):
    repeat = {"output_tokens_per_s": tokens, "tpot_ms": {"p50": 1000 / tokens, "p99": 1100 / tokens},
              "ttft_ms": {"p50": 5.0, "p99": 6.0}, "duration_s": 1.0}
    return {"label": label, "system": "graphbench", "status": "ok", "failure": None, "environment": {"device": "cpu"},
            "model": model, "config": {"model": {"model": model}}, "config_hash": "h", "startup": {"total_s": 1.0},
            "startups": [{"total_s": 1.0, "cold": False}],
            "workloads": [{"name": "closed-c1", "kind": "closed", "concurrency": 1, "repeats": [repeat, dict(repeat)],
                           "summary": {}}],
            "sweep": {"round": {"id": sweep_id, "index": index, "of": 1, "seed": 0, "position": 1}}}


def _folder(tmp_path, *models: str):
    results = tmp_path / "results"
    for model in models:
        write_result(results, "cpu-host", "O0_default", _result(model))
    return results


def _points(*models: str) -> list[SweepPoint]:
    return [SweepPoint("O0_default", {"model.model": m, "optimization_level": 0}) for m in models]


def test_a_sweep_of_another_model_into_a_folder_that_holds_one_is_refused_in_one_line(tmp_path):
    results = _folder(tmp_path, "tiny-llama")
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    for resume in ([], ["--resume"], ["--dry-run"]):  # a dry run foresees it
        answer = runner.invoke(app, ["sweep", *FAST, "--levels", "0", "--model", "tiny-qwen2", "--results",
                                     str(results), *resume])
        assert answer.exit_code == 2, answer.output
        lines = answer.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: results folder "), answer.stderr
        for words in (str(results), "holds results of tiny-llama (1 file)", "this sweep measures tiny-qwen2",
                      "--results NEW_DIR", "--model tiny-llama --resume"):
            assert words in lines[0], (words, lines[0])
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before  # nothing written, nothing run


def test_what_a_folder_still_takes(tmp_path):
    check_folder_takes(tmp_path / "none", _points("tiny-llama"))  # no folder yet
    (tmp_path / "empty").mkdir()
    check_folder_takes(tmp_path / "empty", _points("tiny-llama"))
    same = _folder(tmp_path / "same", "tiny-llama", "tiny-llama")  # the same model again: a history
    check_folder_takes(same, _points("tiny-llama"))
    grid = _folder(tmp_path / "grid", "tiny-llama", "tiny-qwen2")  # a model axis, swept again
    check_folder_takes(grid, _points("tiny-llama", "tiny-qwen2"))
    assert folder_models(grid) == {"tiny-llama": 1, "tiny-qwen2": 1}


def test_a_sweep_adding_a_model_or_dropping_one_is_refused(tmp_path):
    import pytest

    from graphbench.errors import GraphbenchError

    one = _folder(tmp_path / "one", "tiny-llama")
    with pytest.raises(GraphbenchError, match="holds results of tiny-llama .* measures tiny-llama, tiny-qwen2"):
        check_folder_takes(one, _points("tiny-llama", "tiny-qwen2"))
    two = _folder(tmp_path / "two", "tiny-llama", "tiny-qwen2")
    with pytest.raises(GraphbenchError, match=r"tiny-llama \(1 file\), tiny-qwen2 \(1 file\); this sweep measures "
                                              r"tiny-llama, and one report") as caught:
        check_folder_takes(two, _points("tiny-llama"))
    assert "--resume" not in str(caught.value)  # several models: no one sweep to finish


def test_a_checkpoint_folder_is_one_model_however_its_path_is_written(tmp_path, monkeypatch):
    (tmp_path / "ckpt").mkdir()
    monkeypatch.chdir(tmp_path)
    results = _folder(tmp_path, "ckpt")
    check_folder_takes(results, _points("./ckpt/"))
    check_folder_takes(results, _points(str(tmp_path / "ckpt")))


def test_the_same_model_swept_again_into_its_folder_still_runs(tmp_path):
    results = _folder(tmp_path, "tiny-llama")
    answer = runner.invoke(app, ["sweep", *fast(concurrency="1"), "--levels", "0", "--results", str(results)])
    assert answer.exit_code == 0, answer.output
    assert len(load_results([results], merge=False).results) == 2


def test_the_report_names_its_model_in_the_title_and_the_headline(tmp_path):
    results = _folder(tmp_path, "tiny-llama")
    report = write_report([results], tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    html = (tmp_path / "report" / "report.html").read_text()
    assert md.startswith("# graphbench report: tiny-llama\n")
    assert "<h1>graphbench report: tiny-llama</h1>" in html
    assert "## Headline: best configuration per concurrency, tiny-llama" in md
    assert report.headline["model"].tolist() == ["tiny-llama"]
    titled = write_report([results], tmp_path / "titled", title="H200 sweep")  # a title of the user's own
    md = (tmp_path / "titled" / "report.md").read_text()
    assert md.startswith("# H200 sweep\n") and "best configuration per concurrency, tiny-llama" in md
    assert titled.headline is not None


def test_a_report_of_two_models_ranks_each_apart_and_names_both(tmp_path):
    """Two folders of two models, reported together on purpose: the headline has a row per model, never a
    best configuration picked across models (the faster model's point would win every row)."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_result(a, "cpu-host", "O0_default", _result("tiny-llama", tokens=1000.0))
    write_result(b, "cpu-host", "O0_default", _result("smollm2-135m", tokens=100.0, sweep_id="s2"))
    report = write_report([a, b], tmp_path / "report")
    md = (tmp_path / "report" / "report.md").read_text()
    assert md.startswith("# graphbench report: smollm2-135m, tiny-llama\n")
    rows = report.headline[["model", "best", "output_tokens_per_s"]].values.tolist()
    assert rows == [["smollm2-135m", "O0_default (smollm2-135m)", 100.0], ["tiny-llama", "O0_default (tiny-llama)", 1000.0]]
    headline = md.split("## Headline")[1].split("## Charts")[0]
    assert "| model | concurrency |" in headline and "| smollm2-135m | 1 |" in headline
    # the charts' series name the model too, where the same label is two models' points
    from graphbench.reports.frame import results_frame

    frame = results_frame(load_results([a, b]).results)
    assert sorted(frame["series"]) == ["O0_default (smollm2-135m)", "O0_default (tiny-llama)"]
