"""`graphbench cache diff A B`: the compile-cache hash factors that differ between entries and configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from graphbench.cli.main import app
from graphbench.runner.compile.cache import CACHE_SUBDIR, META_FILE
from graphbench.runner.compile.cache_diff import Machine, config_factor_set, diff_factors, factor_set

CPU = Machine("cpu", "x86_64")
H200 = Machine("cuda", "NVIDIA H200", 141 << 30, (9, 0))
TINY = 'optimization_level = 0\n[model]\nmodel = "tiny-llama"\ndevice = "cpu"\ndtype = "{dtype}"\n' \
       "[scheduler]\nmax_num_seqs = {seqs}\nmax_num_batched_tokens = 512\n"


def config(tmp_path: Path, name: str, seqs: int = 16, dtype: str = "float32") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(TINY.format(seqs=seqs, dtype=dtype))
    return path


def entry(root: Path, hash_: str, factors: dict | None) -> Path:
    """A synthetic entry whose metadata records these factors (None: an entry from before they were)."""
    directory = root / CACHE_SUBDIR / hash_
    (directory / "rank_0_0").mkdir(parents=True)
    recorded = {"config": {}} | ({"hash_factors": factors, "device_name": "NVIDIA H200"} if factors else {})
    (directory / META_FILE).write_text(json.dumps({"created": 1.7e9, "summary": "tiny", "factors": recorded}))
    return directory


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "cache"))
    monkeypatch.setattr("graphbench.runner.compile.cache_diff.this_machine", lambda: CPU)
    return tmp_path / "cache"


def diff(*args: str):
    return CliRunner().invoke(app, ["cache", "diff", *map(str, args)])


def test_configs_that_differ_in_max_num_seqs(root, tmp_path):
    result = diff(config(tmp_path, "a", seqs=16), config(tmp_path, "b", seqs=32))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == ["factor                  A   B", "scheduler.max_num_seqs  16  32"]


def test_configs_that_differ_in_dtype(root, tmp_path):
    result = diff(config(tmp_path, "a"), config(tmp_path, "b", dtype="bfloat16"), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["differences"] == [{"factor": "model.dtype", "a": "float32", "b": "bfloat16"}]
    assert doc["identical"] is False and doc["a"]["kind"] == "config"


def test_entries_that_differ_in_the_torch_version(root, tmp_path):
    factors = config_factor_set(config(tmp_path, "a"), CPU).factors
    entry(root, "aaaa111111", factors | {"torch": "2.5.1"})
    entry(root, "bbbb222222", factors | {"torch": "2.6.0"})
    result = diff("aaaa", root / CACHE_SUBDIR / "bbbb222222" / "rank_0_0")  # a prefix, a path into an entry
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"A: entry aaaa111111 ({root / CACHE_SUBDIR / 'aaaa111111'}): tiny; on NVIDIA H200"
    assert result.stdout.splitlines()[-2:] == ["factor  A      B", "torch   2.5.1  2.6.0"]


def test_identical_factors_say_so(root, tmp_path):
    path = config(tmp_path, "a")
    entry(root, "cccc333333", factor_set(str(path)).factors)
    result = diff("cccc333333", path)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("identical: no hash factor differs")
    assert "note: no GPU" not in result.stdout  # (the fixture's machine has no notes)


def test_the_gpu_sets_the_default_token_budget(tmp_path):
    path = tmp_path / "auto.toml"
    path.write_text('[model]\nmodel = "tiny-llama"\n[scheduler]\nmax_num_seqs = 16\n')
    found = {d.name: (d.a, d.b) for d in diff_factors(config_factor_set(path, CPU), config_factor_set(path, H200))}
    assert found["model.device"] == ("cpu", "cuda") and found["model.dtype"] == ("float32", "bfloat16")
    assert found["scheduler.max_num_batched_tokens"] == (2048, 8192)
    assert "model (section hash)" not in found  # explained by its named factors


def test_an_entry_from_before_factor_recording_is_a_clear_error(root, tmp_path):
    entry(root, "dddd444444", None)
    result = diff("dddd", config(tmp_path, "a"))
    assert result.exit_code == 2
    assert "entry dddd444444 predates hash-factor recording" in result.output


def test_unknown_and_ambiguous_names_are_errors(root, tmp_path):
    entry(root, "eeee555555", {"torch": "1"})
    entry(root, "eeee666666", {"torch": "2"})
    assert "is the start of 2 entries" in diff("eeee", "eeee5").output
    result = diff("ffff", "eeee5")
    assert result.exit_code == 2 and "no compile-cache entry or config file 'ffff'" in result.output
    assert diff("eeee5", "eeee6", "--format", "xml").exit_code == 2


def test_the_kernel_set_is_a_factor_and_the_debug_hatches_are_not(monkeypatch, tmp_path):
    """model.kernels = torch changes the traced code (no graphbench op in it), so it is in the config's
    hash: a default start never loads its entry. The debug hatches act at run time: no new entry."""
    from graphbench.runner.compile.cache import compile_hash, environment_factors

    ours, torch_ops = config(tmp_path, "ours"), tmp_path / "torch.toml"
    torch_ops.write_text(ours.read_text().replace('device = "cpu"', 'device = "cpu"\nkernels = "torch"'))
    diffs = diff_factors(config_factor_set(ours, CPU), config_factor_set(torch_ops, CPU))
    assert [(d.name, d.a, d.b) for d in diffs] == [("model.kernels", "graphbench", "torch")]
    default_hash, default_factors = compile_hash("c0ffee", "2.11.0"), environment_factors("2.11.0")
    for name in ("GRAPHBENCH_PDL", "GRAPHBENCH_DIRECT_LAUNCH", "GRAPHBENCH_TRITON_KEY_CACHE"):
        monkeypatch.setenv(name, "0")
    monkeypatch.setenv("GRAPHBENCH_CHECK_GRAPH_INPUTS", "1")
    assert environment_factors("2.11.0") == default_factors and compile_hash("c0ffee", "2.11.0") == default_hash


def test_an_empty_argument_is_not_the_working_folder(root):
    # (Path("") is "."; the error named "." as the entry looked for)
    result = CliRunner().invoke(app, ["cache", "diff", "", "x"])
    assert result.exit_code == 2
    assert "got an empty one" in result.output
