"""graphbench.env: the one module that reads the environment, each value checked where it is read."""

import pytest

from graphbench import env
from graphbench.errors import GraphbenchError


def test_the_cache_root_defaults_and_expands(monkeypatch, tmp_path):
    monkeypatch.delenv("GRAPHBENCH_CACHE_ROOT", raising=False)
    assert env.cache_root() == (env.Path.home() / ".cache" / "graphbench")
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "c"))
    assert env.cache_root() == tmp_path / "c"


@pytest.mark.parametrize("value, said", [("", "set but empty"), ("   ", "set but empty"),
                                         ("~no_such_user_xq/cache", "~no_such_user_xq is not a user")])
def test_a_cache_root_that_cannot_be_used_is_one_line(monkeypatch, value, said):
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", value)
    with pytest.raises(GraphbenchError, match=said):
        env.cache_root()


def test_flags_other_programs_set(monkeypatch):
    for value, on in (("1", True), ("0", False), ("", False)):
        monkeypatch.setenv("TRITON_INTERPRET", value)
        assert env.flag("TRITON_INTERPRET") is on
    monkeypatch.delenv("TRITON_INTERPRET")
    assert env.flag("TRITON_INTERPRET") is False


# --- every GRAPHBENCH_* variable checked when a command starts (env.check_all), even where it is unused


@pytest.mark.parametrize("name, value, accepted", [
    ("GRAPHBENCH_PDL", "maybe", "expected 0 or 1"), ("GRAPHBENCH_DIRECT_LAUNCH", "", "expected 0 or 1"),
    ("GRAPHBENCH_CHECK_GRAPH_INPUTS", "yes", "expected 0 or 1"), ("GRAPHBENCH_TRITON_KEY_CACHE", "2", "expected 0 or 1"),
    ("GRAPHBENCH_CACHE_ROOT", "", "set but empty"),
    ("GRAPHBENCH_INJECT_FAULT", "O0_default:explode", "kill, oom, compile-error, hang, worker-exit"),
    ("GRAPHBENCH_INJECT_FAULT", "oops", "label:kind"), ("GRAPHBENCH_TP_WORKER", "banana", "expected 0 or 1")])
def test_check_all_names_the_variable_its_value_and_what_it_accepts(name, value, accepted):
    with pytest.raises(GraphbenchError) as caught:
        env.check_all({name: value})
    assert name in str(caught.value) and accepted in str(caught.value)
    if value:
        assert repr(value) in str(caught.value)


def test_check_all_passes_good_values_and_returns_the_names_graphbench_does_not_read():
    good = {"GRAPHBENCH_PDL": "0", "GRAPHBENCH_DIRECT_LAUNCH": "1", "GRAPHBENCH_CACHE_ROOT": "/tmp/c",
            "GRAPHBENCH_INJECT_FAULT": "a:kill,b_c:oom", "GRAPHBENCH_TP_WORKER": "1", "PATH": "/bin"}
    assert env.check_all(good) == []
    assert env.check_all({"GRAPHBENCH_INJECT_FAULT": ""}) == []
    assert env.check_all({**good, "GRAPHBENCH_FUSED_GEMV": "0", "GRAPHBENCH_PLD": "0"}) == [
        "GRAPHBENCH_FUSED_GEMV", "GRAPHBENCH_PLD"]


def _invoke(monkeypatch, environ: dict, *args):
    from typer.testing import CliRunner

    from graphbench.cli.main import app

    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("args", [
    ["generate", "--model", "tiny-llama", "-O", "0", "--device", "cpu", "-p", "1,2,3", "--max-tokens", "2"],
    ["run", "--model", "tiny-llama", "-O", "0", "--device", "cpu"], ["sweep", "--levels", "0"],
    ["cache", "list"], ["tune", "--model", "uniform:1-64", "--max-graphs", "4"]])
def test_a_bad_value_is_one_line_and_exit_2_before_the_command_runs_even_on_the_cpu(monkeypatch, tmp_path, args):
    """PDL is never read on the CPU: GRAPHBENCH_PDL=maybe used to run as the default, silently."""
    monkeypatch.chdir(tmp_path)
    result = _invoke(monkeypatch, {"GRAPHBENCH_PDL": "maybe"}, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == ["error: GRAPHBENCH_PDL='maybe': expected 0 or 1 (default 1)"]
    assert list(tmp_path.iterdir()) == []  # nothing ran: no results folder


def test_ladder_version_and_help_still_run_with_a_bad_value(monkeypatch):
    for args in (["ladder", "--max-num-seqs", "8"], ["--version"], ["sweep", "--help"], ["cache", "list", "-h"]):
        result = _invoke(monkeypatch, {"GRAPHBENCH_PDL": "maybe"}, *args)
        assert result.exit_code == 0, (args, result.output)


def test_a_variable_graphbench_does_not_read_is_a_warning_naming_it(monkeypatch, tmp_path):
    result = _invoke(monkeypatch, {"GRAPHBENCH_CACHE_ROOT": str(tmp_path / "c"), "GRAPHBENCH_PLD": "0"}, "cache", "list")
    assert result.exit_code == 0, result.output
    warning = [line for line in result.stderr.splitlines() if "GRAPHBENCH_PLD" in line]
    assert len(warning) == 1 and warning[0].startswith("warning: ") and "GRAPHBENCH_PDL" in warning[0], result.stderr
