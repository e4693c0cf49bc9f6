"""`graphbench cache list|clear` on fake compile-cache entries under a temporary cache root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import graphbench
from graphbench.cli.cache import human_size
from graphbench.cli.main import app

runner = CliRunner()
T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
DAY = 86_400.0

# hash -> (created or None for "no metadata", summary, total bytes of the entry directory)
FAKE = {
    "aaaa111111": (T0, "llama-tiny bf16 FULL_AND_PIECEWISE mns=256 [dyn]", 1536),
    "bbbb222222": (T0 + DAY, "qwen-tiny fp16 PIECEWISE mns=64", 5 * 2**20),
    "cccc333333": (None, "?", 10),
}
NEWEST_FIRST = ["bbbb222222", "aaaa111111", "cccc333333"]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An empty cache root in tmp_path, local time = UTC."""
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "cache"))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield tmp_path / "cache"
    monkeypatch.undo()
    time.tzset()


def make_entry(root: Path, hash_: str, created: float | None, summary: str, total: int) -> Path:
    """<root>/torch_compile_cache/<hash>/ with metadata and rank_0_0 files adding up to `total` bytes."""
    entry = root / "torch_compile_cache" / hash_
    rank = entry / "rank_0_0"
    (rank / "inductor").mkdir(parents=True)
    used = 0
    if created is not None:
        meta = json.dumps({"created": created, "summary": summary, "factors": {"dtype": "bf16"}})
        (entry / "graphbench_meta.json").write_text(meta)
        used += len(meta.encode())
    (rank / "compiled.ok").write_bytes(b"ok")
    used += 2
    with open(rank / "inductor" / "code.bin", "wb") as f:
        f.truncate(total - used)  # sparse, but st_size counts
    return entry


@pytest.fixture
def entries(root: Path) -> Path:
    for h, (created, summary, total) in FAKE.items():
        make_entry(root, h, created, summary, total)
    (root / "torch_compile_cache" / "stray.txt").write_text("not an entry")
    return root


def invoke(*args: str, input: str | None = None):
    return runner.invoke(app, ["cache", *args], input=input, env={"COLUMNS": "200"})


def table_rows(out: str) -> list[list[str]]:
    rows = []
    for line in out.splitlines():
        if line.startswith(("│", "┃")):
            rows.append([cell.strip() for cell in line.replace("┃", "│").strip("│").split("│")])
    return rows


def existing(root: Path) -> set[str]:
    base = root / "torch_compile_cache"
    return {p.name for p in base.iterdir() if p.is_dir()} if base.is_dir() else set()


# --- helpers --------------------------------------------------------------------------------


def test_human_size() -> None:
    assert human_size(0) == "0 B"
    assert human_size(1023) == "1023 B"
    assert human_size(1024) == "1.0 KiB"
    assert human_size(1536) == "1.5 KiB"
    assert human_size(5 * 2**20) == "5.0 MiB"
    assert human_size(3 * 2**30 + 2**29) == "3.5 GiB"
    assert human_size(2**50) == "1024.0 TiB"


# --- list -----------------------------------------------------------------------------------


def test_list_table(entries: Path) -> None:
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    out = result.stdout
    assert f"compile cache: {entries / 'torch_compile_cache'}" in out
    assert table_rows(out) == [
        ["hash", "size", "created", "config"],
        ["bbbb222222", "5.0 MiB", "2023-11-15 22:13:20", "qwen-tiny fp16 PIECEWISE mns=64"],
        ["aaaa111111", "1.5 KiB", "2023-11-14 22:13:20", "llama-tiny bf16 FULL_AND_PIECEWISE mns=256 [dyn]"],
        ["cccc333333", "10 B", "?", "?"],
    ]
    total = 1536 + 5 * 2**20 + 10
    assert out.rstrip().splitlines()[-1] == f"total: 3 entries, 5.0 MiB ({total} bytes)"
    assert "stray" not in out


def test_list_json(entries: Path) -> None:
    result = invoke("list", "--format", "json")
    assert result.exit_code == 0, result.output
    base = entries / "torch_compile_cache"
    data = json.loads(result.stdout)
    assert data == {
        "root": str(base),
        "entries": [
            {"hash": "bbbb222222", "path": str(base / "bbbb222222"), "size_bytes": 5 * 2**20, "size": "5.0 MiB",
             "created": T0 + DAY, "created_local": "2023-11-15 22:13:20", "summary": "qwen-tiny fp16 PIECEWISE mns=64"},
            {"hash": "aaaa111111", "path": str(base / "aaaa111111"), "size_bytes": 1536, "size": "1.5 KiB",
             "created": T0, "created_local": "2023-11-14 22:13:20",
             "summary": "llama-tiny bf16 FULL_AND_PIECEWISE mns=256 [dyn]"},
            {"hash": "cccc333333", "path": str(base / "cccc333333"), "size_bytes": 10, "size": "10 B",
             "created": None, "created_local": "?", "summary": "?"},
        ],
        "total_bytes": 1536 + 5 * 2**20 + 10,
        "kernel_choices": [],
    }


@pytest.mark.parametrize("make_base", [False, True], ids=["no-root", "empty-root"])
def test_list_empty_is_friendly(root: Path, make_base: bool) -> None:
    if make_base:
        (root / "torch_compile_cache").mkdir(parents=True)
    result = invoke("list")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"compile cache is empty: no entries under {root / 'torch_compile_cache'}"
    result = invoke("list", "--format", "json")
    assert json.loads(result.stdout) == {"root": str(root / "torch_compile_cache"), "entries": [], "total_bytes": 0,
                                         "kernel_choices": []}


def test_list_bad_format(entries: Path) -> None:
    result = invoke("list", "--format", "yaml")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == ["error: unknown format 'yaml'; choose from table, json"]


# --- clear ----------------------------------------------------------------------------------


def test_clear_one_hash_with_yes(entries: Path) -> None:
    result = invoke("clear", "bbbb222222", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "removed bbbb222222 (5.0 MiB)",
        f"freed 5.0 MiB ({5 * 2**20} bytes) from 1 entry",
    ]
    assert existing(entries) == {"aaaa111111", "cccc333333"}
    assert (entries / "torch_compile_cache" / "stray.txt").exists()


def test_clear_one_hash_confirmed(entries: Path) -> None:
    result = invoke("clear", "aaaa111111", input="y\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"will remove 1 entry from {entries / 'torch_compile_cache'}:" in out
    assert "aaaa111111  1.5 KiB  llama-tiny bf16 FULL_AND_PIECEWISE mns=256 [dyn]" in out
    assert "remove 1 entry, 1.5 KiB? [y/N]" in out
    assert "removed aaaa111111 (1.5 KiB)" in out and "freed 1.5 KiB (1536 bytes) from 1 entry" in out
    assert existing(entries) == {"bbbb222222", "cccc333333"}


def test_clear_several_hashes_dedupes(entries: Path) -> None:
    result = invoke("clear", "cccc333333", "aaaa111111", "cccc333333", "-y")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [  # newest first, as listed
        "removed aaaa111111 (1.5 KiB)",
        "removed cccc333333 (10 B)",
        "freed 1.5 KiB (1546 bytes) from 2 entries",
    ]
    assert existing(entries) == {"bbbb222222"}


@pytest.mark.parametrize("extra", [[], ["--all"]], ids=["implied", "explicit"])
def test_clear_all_with_yes(entries: Path, extra: list[str]) -> None:
    result = invoke("clear", *extra, "--yes")
    assert result.exit_code == 0, result.output
    total = 1536 + 5 * 2**20 + 10
    assert result.stdout.splitlines() == [
        "removed bbbb222222 (5.0 MiB)",
        "removed aaaa111111 (1.5 KiB)",
        "removed cccc333333 (10 B)",
        f"freed 5.0 MiB ({total} bytes) from 3 entries",
    ]
    assert existing(entries) == set()
    assert invoke("list").stdout.startswith("compile cache is empty")


def test_clear_all_confirmation_shows_everything_and_total(entries: Path) -> None:
    result = invoke("clear", input="n\n")
    out = result.stdout
    assert f"will remove 3 entries from {entries / 'torch_compile_cache'}:" in out
    for h in FAKE:
        assert f"  {h}  " in out
    assert "remove 3 entries, 5.0 MiB? [y/N]" in out


@pytest.mark.parametrize(("answer", "code"), [("n\n", 1), ("\n", 1), ("", 2)], ids=["no", "default", "eof"])
def test_declined_confirmation_removes_nothing(entries: Path, answer: str, code: int) -> None:
    before = existing(entries)
    result = invoke("clear", input=answer)
    assert result.exit_code == code, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # no escaped Abort
    assert not [line for line in result.stdout.splitlines() if line.startswith(("removed ", "freed "))]
    assert result.stdout.splitlines()[-1].startswith("aborted: nothing removed")
    assert existing(entries) == before == set(FAKE)
    result = invoke("clear", "aaaa111111", input=answer)
    assert result.exit_code == code
    assert existing(entries) == set(FAKE)


NO_ANSWER = "aborted: nothing removed (no answer; use --yes when not interactive)"


def test_declined_confirmation_output(entries: Path) -> None:
    result = invoke("clear", "aaaa111111", input="n\n")
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an escaped exception
    assert result.stdout.splitlines() == [
        f"will remove 1 entry from {entries / 'torch_compile_cache'}:",
        "  aaaa111111  1.5 KiB  llama-tiny bf16 FULL_AND_PIECEWISE mns=256 [dyn]",
        "remove 1 entry, 1.5 KiB? [y/N]: n",
        "aborted: nothing removed",
    ]
    assert result.stderr == ""


def test_unanswered_confirmation_is_a_clean_usage_error(entries: Path) -> None:
    # stdin empty (CI without --yes): typer.confirm raises typer.Abort, which must not escape; exit 2, as
    # every usage error (1 is the gate's regression)
    result = invoke("clear", "aaaa111111", input="")
    assert result.exit_code == 2
    assert isinstance(result.exception, SystemExit)
    assert result.stdout.splitlines() == [
        f"will remove 1 entry from {entries / 'torch_compile_cache'}:",
        "  aaaa111111  1.5 KiB  llama-tiny bf16 FULL_AND_PIECEWISE mns=256 [dyn]",
        "remove 1 entry, 1.5 KiB? [y/N]: ",
        NO_ANSWER,
    ]
    assert result.stderr == ""
    assert existing(entries) == set(FAKE)


def test_clear_without_a_terminal_has_no_traceback(entries: Path) -> None:
    """The audit's case, in a real process: `graphbench cache clear </dev/null`."""
    src = str(Path(graphbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
           "GRAPHBENCH_CACHE_ROOT": str(entries)}
    proc = subprocess.run([sys.executable, "-m", "graphbench", "cache", "clear"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=env, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == f"will remove 3 entries from {entries / 'torch_compile_cache'}:"
    assert lines[-2:] == ["remove 3 entries, 5.0 MiB? [y/N]: ", NO_ANSWER]
    assert existing(entries) == set(FAKE)


@pytest.mark.parametrize("args", [["zzzz999999"], ["aaaa111111", "zzzz999999"], ["zzzz999999", "--yes"]])
def test_unknown_hash_is_one_line_exit_2_and_removes_nothing(entries: Path, args: list[str]) -> None:
    result = invoke("clear", *args, input="y\n")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: no compile-cache entry 'zzzz999999' under {entries / 'torch_compile_cache'}")
    assert "aaaa111111" in lines[0]  # the known entries are listed
    assert existing(entries) == set(FAKE)


def test_clear_takes_a_unique_hash_prefix(entries: Path) -> None:
    result = invoke("clear", "bbbb", "aaaa111111", "-y")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[:2] == ["removed bbbb222222 (5.0 MiB)", "removed aaaa111111 (1.5 KiB)"]
    assert existing(entries) == {"cccc333333"}


def test_an_ambiguous_prefix_is_one_line_exit_2_and_removes_nothing(entries: Path) -> None:
    make_entry(entries, "aaaa999999", T0, "other", 4096)
    result = invoke("clear", "cccc", "aaaa", "--yes")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "error: 'aaaa' is the start of 2 compile-cache entries (aaaa111111, aaaa999999): give more of it"]
    assert existing(entries) == {*FAKE, "aaaa999999"}


def test_hashes_and_all_conflict(entries: Path) -> None:
    result = invoke("clear", "aaaa111111", "--all", "--yes")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: give entry hashes or --all, not both"
    assert existing(entries) == set(FAKE)


def test_clear_empty_cache(root: Path) -> None:
    result = invoke("clear")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"compile cache is empty: nothing to remove under {root / 'torch_compile_cache'}"
    result = invoke("clear", "aaaa111111", "--yes")
    assert result.exit_code == 2 and result.stderr.startswith("error: no compile-cache entry 'aaaa111111'")


def _timed_choices(root: Path) -> Path:
    """Two GPUs' shared kernel choices (runner/kernel_choice_store.py) and a file that is not one."""
    folder = root / "kernel_choices"
    folder.mkdir(parents=True)
    for name in ("NVIDIA-H200-pdl-0123456789ab.json", "NVIDIA-H100-80GB-HBM3-pdl-0123456789ab.json"):
        (folder / name).write_text("{}")
    (folder / "notes.txt").write_text("not graphbench's")
    return folder


def test_clear_all_removes_the_gpus_kernel_choices_and_one_entry_keeps_them(entries: Path) -> None:
    folder = _timed_choices(entries)
    result = invoke("clear", "aaaa111111", "--yes")
    assert result.exit_code == 0 and len(list(folder.glob("*.json"))) == 2
    result = invoke("clear", input="n\n")
    assert result.exit_code == 1 and f"will remove the kernel choices of 2 GPUs and launch modes ({folder})" in result.stdout
    assert "remove 2 entries, 5.0 MiB and the kernel choices? [y/N]" in result.stdout
    assert len(list(folder.glob("*.json"))) == 2
    result = invoke("clear", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"removed the kernel choices of 2 GPUs and launch modes ({folder})"
    assert existing(entries) == set() and [p.name for p in folder.iterdir()] == ["notes.txt"]


def test_list_names_each_gpus_kernel_choices(entries: Path) -> None:
    folder = _timed_choices(entries)
    (folder / "NVIDIA-H200-pdl-0123456789ab.json").write_text(json.dumps({"sets": {"a": {}, "b": {}}}))
    (folder / "NVIDIA-H100-80GB-HBM3-pdl-0123456789ab.json").write_text("{not json")
    out = invoke("list").stdout.rstrip().splitlines()
    assert out[-2:] == ["kernel choices: NVIDIA-H100-80GB-HBM3-pdl-0123456789ab.json (unreadable)",
                        "kernel choices: NVIDIA-H200-pdl-0123456789ab.json (2 models)"]
    data = json.loads(invoke("list", "--format", "json").stdout)["kernel_choices"]
    assert [(c["file"], c["models"]) for c in data] == [("NVIDIA-H100-80GB-HBM3-pdl-0123456789ab.json", None),
                                                        ("NVIDIA-H200-pdl-0123456789ab.json", 2)]


def test_clear_kernel_choices_with_no_entries(root: Path) -> None:
    folder = _timed_choices(root)
    result = invoke("clear", input="y\n")
    assert result.exit_code == 0, result.output
    assert "remove the kernel choices? [y/N]" in result.stdout
    assert result.stdout.splitlines()[-1] == f"removed the kernel choices of 2 GPUs and launch modes ({folder})"
    assert invoke("clear").stdout.strip().startswith("compile cache is empty: nothing to remove")


# --- wiring ---------------------------------------------------------------------------------


def test_cache_without_a_subcommand_prints_its_help_once() -> None:
    result = runner.invoke(app, ["cache"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert result.stdout.count("Usage:") == 1
    assert result.stdout.rstrip() == runner.invoke(app, ["cache", "--help"], env={"COLUMNS": "200"}).stdout.rstrip()


def test_help() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "cache" in result.stdout
    result = runner.invoke(app, ["cache", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "list" in result.stdout and "clear" in result.stdout
    result = runner.invoke(app, ["cache", "clear", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--yes", "--all"):
        assert option in result.stdout


def test_cache_cli_never_imports_torch(tmp_path: Path) -> None:
    src = str(Path(graphbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
           "GRAPHBENCH_CACHE_ROOT": str(tmp_path)}
    code = (
        "import sys\n"
        "import graphbench.cli.main, graphbench.cli.cache\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "from typer.testing import CliRunner\n"
        "r = CliRunner().invoke(graphbench.cli.main.app, ['cache', 'list'])\n"
        "assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(graphbench.cli.main.app, ['cache', 'clear', '--yes'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"config = {str(Path(graphbench.__file__).parent / 'sample_configs' / 'engines' / 'tiny-cpu.toml')!r}\n"
        "r = CliRunner().invoke(graphbench.cli.main.app, ['cache', 'diff', config, config])\n"
        "assert r.exit_code == 0 and 'identical' in r.output, r.output\n"
        "assert 'torch' not in sys.modules, 'torch was imported by a command'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def test_cache_metadata_of_the_wrong_shape_is_listed_as_unreadable(tmp_path, monkeypatch):
    from graphbench.runner.compile.cache import list_entries

    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path))
    for name, content in (("a", b"[1, 2]"), ("b", b'{"created": "x", "summary": 5}'), ("c", b"\xff"),
                          ("d", b'{"created": 1e400, "summary": "tiny-llama -O2"}')):
        entry = tmp_path / "torch_compile_cache" / name
        entry.mkdir(parents=True)
        (entry / "graphbench_meta.json").write_bytes(content)
    assert sorted((e.hash, e.created, e.summary) for e in list_entries()) == [
        ("a", None, "(unreadable metadata)"), ("b", None, "(unreadable metadata)"),
        ("c", None, "(unreadable metadata)"), ("d", None, "tiny-llama -O2")]


def test_clear_never_follows_a_link_out_of_the_cache_root(tmp_path, monkeypatch):
    """torch_compile_cache a link to a folder of the user's files: nothing is listed or removed there."""
    root, mine = tmp_path / "root", tmp_path / "my-files"
    (mine / "thesis").mkdir(parents=True)
    (mine / "thesis" / "chapter1.tex").write_text("precious")
    root.mkdir()
    (root / "torch_compile_cache").symlink_to(mine, target_is_directory=True)
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(root))
    result = runner.invoke(app, ["cache", "clear", "--yes"])
    assert result.exit_code == 2 and "is a link" in result.output
    assert (mine / "thesis" / "chapter1.tex").read_text() == "precious"


def test_clear_removes_only_what_graphbench_made(tmp_path, monkeypatch):
    root = tmp_path / "root"
    make_entry(root, "0123456789", 1000.0, "ours", 4096)
    foreign = root / "torch_compile_cache" / "photos"
    foreign.mkdir(parents=True)
    (foreign / "cat.jpg").write_bytes(b"jpeg")
    outside = tmp_path / "elsewhere"
    (outside / "rank_0_0").mkdir(parents=True)
    (outside / "rank_0_0" / "compiled.ok").write_bytes(b"ok")  # looks like an entry, but reached through a link
    (root / "torch_compile_cache" / "abcdefabcd").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(root))
    result = runner.invoke(app, ["cache", "clear", "--yes"])
    assert result.exit_code == 0, result.output
    assert not (root / "torch_compile_cache" / "0123456789").exists()
    assert (foreign / "cat.jpg").read_bytes() == b"jpeg" and (outside / "rank_0_0" / "compiled.ok").exists()
