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
