"""TOML reading with one-line errors."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from graphbench.errors import GraphbenchError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; raise GraphbenchError naming the file and the problem."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise GraphbenchError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise GraphbenchError(f"config path is a folder, not a TOML file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GraphbenchError(f"malformed TOML in {path}: {exc}") from None
    except UnicodeDecodeError:
        raise GraphbenchError(f"config file is not UTF-8 text: {path}") from None
