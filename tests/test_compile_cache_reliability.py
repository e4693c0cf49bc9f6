"""The compile cache under faults: a corrupt entry is rebuilt with a warning; concurrent starts share it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams

pytestmark = pytest.mark.slow
# torch ops: Inductor compiles every piece (not only the pieces graphbench's ops cannot cover): the entry
# then holds Inductor's and AOTAutograd's caches and compiled libraries, the artefacts these faults are planted in
OVERRIDES = {"model.device": "cpu", "optimization_level": 1, "scheduler.max_num_seqs": 4,
             "scheduler.max_num_batched_tokens": 32, "model.kernels": "torch"}
PROMPTS = [[1, 2, 3], [9, 8, 7, 6]]


def _start_in_subprocess(cache_root: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(OVERRIDES)], capture_output=True, text=True,
                          env=_env(cache_root), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _env(cache_root: Path) -> dict[str, str]:
    return dict(os.environ, GRAPHBENCH_CACHE_ROOT=str(cache_root), XDG_CONFIG_HOME=f"{cache_root}-config",
                PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))


@pytest.fixture(scope="module")
def concurrent_starts(tmp_path_factory) -> tuple[Path, list[dict]]:
    """Two processes started at once on an empty cache root (what each printed): the module's one compile."""
    root = tmp_path_factory.mktemp("first-start") / "root"
    procs = [subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(OVERRIDES)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env(root)) for _ in range(2)]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return root, outs


@pytest.fixture(scope="module")
def first_start(concurrent_starts) -> tuple[Path, dict]:
    """A cache root holding one good entry (compiled once for the module), and that start's tokens."""
    root, outs = concurrent_starts
    expected = next(o for o in outs if not o["loaded"])
    return root, expected


def _copy_of(first_start: tuple[Path, dict], tmp_path: Path) -> tuple[Path, dict]:
    """The entry copied into a root of this test's own, with its signing key (modes kept)."""
    import shutil

    root, expected = first_start
    shutil.copytree(root, tmp_path, dirs_exist_ok=True)
    shutil.copytree(f"{root}-config", f"{tmp_path}-config")
    return tmp_path, expected


def test_corrupt_cache_entry_is_rebuilt(first_start, tmp_path, monkeypatch, caplog):
    # the entry is written by another process (files mapped by this process must not be truncated)
    tmp_path, expected = _copy_of(first_start, tmp_path)
    (directory,) = [p for p in (tmp_path / "torch_compile_cache").glob("*/rank_0_0")]
    # truncate every cached artefact: Inductor's and Triton's caches, the saved split graph and pieces
    files = [p for p in directory.rglob("*") if p.is_file() and p.name not in ("compiled.ok", "manifest.json")]
    assert len(files) > 5
    for path in files:
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{tmp_path}-config")
    with caplog.at_level("WARNING"):
        again = Engine(load_engine_config(overrides=OVERRIDES))
    assert again.generate(PROMPTS, SamplingParams(max_tokens=5)) == expected["tokens"]
    # detected before anything was loaded (a truncated compiled library would crash the process)
    assert again.report.compile_cache_rebuilt and not again.report.compile_loaded
    assert "is damaged" in caplog.text and "corrupt or truncated" in caplog.text
    # after the rebuild the entry is good again: the next start loads it
    assert _start_in_subprocess(tmp_path)["loaded"]


class _Payload:
    """A pickle that, when loaded, leaves a file behind: what a planted cache entry would run."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_is_never_loaded(first_start, tmp_path, monkeypatch):
    # what a start checks before it loads anything (runner/compile/startup.py: an entry that fails is
    # deleted and compiled afresh, as test_corrupt_cache_entry_is_rebuilt runs end to end)
    import hashlib
    import pickle

    from graphbench.runner.compile.cache_trust import admit_entry, signing_key

    tmp_path, _ = _copy_of(first_start, tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", f"{tmp_path}-config")
    key = signing_key(tmp_path)
    (directory,) = [p for p in (tmp_path / "torch_compile_cache").glob("*/rank_0_0")]
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Payload(marker))
    # a file the manifest does not list: deleted unread, and the entry stays good
    extra = directory / "graphbench_aot" / "planted.pkl"
    extra.write_bytes(payload)
    assert admit_entry(directory, key) is None and not extra.exists() and not marker.exists()
    manifest = json.loads((directory / "manifest.json").read_text())
    assert set(manifest) == {"files", "hmac"}
    # every file of the entry (graphbench's split graph and pieces, Inductor's and AOTAutograd's caches)
    # replaced by the payload, every size and checksum rewritten to match; the signature left as it was
    planted = [p for p in directory.rglob("*") if p.is_file() and p.name not in ("manifest.json", "compiled.ok")]
    assert any(p.name == "split_graph.pkl" for p in planted) and len(planted) > 5
    for path in planted:
        path.write_bytes(payload)
        manifest["files"][str(path.relative_to(directory))] = [len(payload), hashlib.sha256(payload).hexdigest()]
    (directory / "manifest.json").write_text(json.dumps(manifest))
    assert admit_entry(directory, key).startswith("manifest not signed with this user's cache key")
    assert not marker.exists()


def test_the_cache_trusts_only_a_private_root_and_key(tmp_path, monkeypatch):
    from graphbench.errors import GraphbenchError
    from graphbench.runner.compile.cache_trust import check_private_root, key_path, signing_key

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "root"
    root.mkdir(mode=0o755)
    check_private_root(root)
    (root / "kernel_choices").mkdir(mode=0o777)  # each GPU's kernel choices, copied into signed entries
    (root / "kernel_choices").chmod(0o777)
    with pytest.raises(GraphbenchError, match="kernel_choices is owned or writable by another user"):
        check_private_root(root)
    (root / "kernel_choices").chmod(0o700)
    check_private_root(root)
    root.chmod(0o777)
    with pytest.raises(GraphbenchError, match="writable by another user"):
        check_private_root(root)
    key = signing_key(root)
    assert len(key) == 32 and signing_key(root) == key and key_path().stat().st_mode & 0o777 == 0o600
    key_path().chmod(0o644)
    with pytest.raises(GraphbenchError, match="only you can read"):
        signing_key(root)
    with pytest.raises(GraphbenchError, match="inside the cache root"):
        signing_key(tmp_path)


SCRIPT = """
import json, sys
from graphbench.config import load_engine_config
from graphbench.runner.engine import Engine
from graphbench.runner.request import SamplingParams
e = Engine(load_engine_config(overrides=json.loads(sys.argv[1])))
print(json.dumps({"loaded": e.report.compile_loaded,
                  "tokens": e.generate([[1, 2, 3], [9, 8, 7, 6]], SamplingParams(max_tokens=5))}))
"""


def test_concurrent_starts_share_one_cache_entry(concurrent_starts):
    _, outs = concurrent_starts
    assert outs[0]["tokens"] == outs[1]["tokens"]
    assert sorted(o["loaded"] for o in outs) == [False, True]  # one compiled, the other waited and loaded


def test_cache_diff_finds_a_config_identical_to_the_entry_it_compiled(concurrent_starts, tmp_path, monkeypatch):
    # the entry a real compiling start wrote records its factors, and the config it ran resolves to them
    from typer.testing import CliRunner

    from graphbench.cli.main import app

    root, _ = concurrent_starts
    (entry,) = [p.parent for p in (root / "torch_compile_cache").glob("*/rank_0_0")]
    config = tmp_path / "engine.toml"
    config.write_text('optimization_level = 1\n[model]\ndevice = "cpu"\n'
                      "[scheduler]\nmax_num_seqs = 4\nmax_num_batched_tokens = 32\n")
    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(root))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the starts above ran on the CPU
    result = CliRunner().invoke(app, ["cache", "diff", entry.name, str(config), "--format", "json"])
    assert [(d["factor"], d["a"], d["b"]) for d in json.loads(result.stdout)["differences"]] == [
        ("model.kernels", "torch", "graphbench")]
    config.write_text(config.read_text().replace('device = "cpu"', 'device = "cpu"\nkernels = "torch"'))  # as they ran
    result = CliRunner().invoke(app, ["cache", "diff", entry.name, str(config), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["identical"], doc["differences"]
    other = tmp_path / "other.toml"
    other.write_text(config.read_text().replace("max_num_seqs = 4", "max_num_seqs = 8"))
    result = CliRunner().invoke(app, ["cache", "diff", entry.name, str(other), "--format", "json"])
    assert [d["factor"] for d in json.loads(result.stdout)["differences"]] == ["scheduler.max_num_seqs"]


def test_first_starts_at_once_read_one_whole_key(tmp_path, monkeypatch):
    """Two first starts create the signing key at once: each reads the whole key that won, never the
    empty file of a key being written (which read as 'damaged, 0 bytes' before)."""
    import threading

    from graphbench.runner.compile.cache_trust import key_path, signing_key

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "root"
    for trial in range(20):
        if key_path().exists():
            key_path().unlink()
        barrier, keys, errors = threading.Barrier(8), [], []

        def start():
            barrier.wait()
            try:
                keys.append(signing_key(root))
            except Exception as exc:  # noqa: BLE001 - the failure under test
                errors.append(exc)

        threads = [threading.Thread(target=start) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, (trial, errors[0])
        assert len(keys) == 8 and len(set(keys)) == 1 and len(keys[0]) == 32
        assert [p.name for p in key_path().parent.iterdir()] == ["cache.key"]  # no temporary left behind


def test_a_key_is_made_where_the_folder_has_no_hard_links(tmp_path, monkeypatch):
    """vfat, some FUSE and SMB mounts refuse os.link (EPERM): the key is renamed into place instead; a
    folder where nothing can be written is one line naming XDG_CONFIG_HOME, and no temporary is left."""
    import errno

    from graphbench.errors import GraphbenchError
    from graphbench.runner.compile import cache_trust

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))

    def no_links(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(cache_trust.os, "link", no_links)
    key = cache_trust.signing_key(tmp_path / "root")
    assert len(key) == 32 and cache_trust.signing_key(tmp_path / "root") == key
    assert [p.name for p in cache_trust.key_path().parent.iterdir()] == ["cache.key"]

    def full_disk(path, flags, mode=0o777):
        raise OSError(errno.ENOSPC, "No space left on device")

    cache_trust.key_path().unlink()
    monkeypatch.setattr(cache_trust.os, "open", full_disk)
    with pytest.raises(GraphbenchError, match="cannot create the cache key .*No space left on device; set XDG_CONFIG_HOME"):
        cache_trust.signing_key(tmp_path / "root")
    assert list(cache_trust.key_path().parent.iterdir()) == []


def test_a_key_folder_that_cannot_be_made_is_one_error_naming_xdg_config_home(tmp_path, monkeypatch):
    """A file where the key's folder goes (or a read-only home): mkdir raised NotADirectoryError, a traceback
    from an engine started outside the CLI."""
    from graphbench.errors import GraphbenchError
    from graphbench.runner.compile import cache_trust

    (tmp_path / "config").write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    with pytest.raises(GraphbenchError) as caught:
        cache_trust.signing_key(tmp_path / "root")
    assert str(caught.value) == (f"cannot create the cache key's folder {tmp_path}/config/graphbench: Not a directory; "
                                 "set XDG_CONFIG_HOME to a folder you can write")
