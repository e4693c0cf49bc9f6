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


MAX_TOML_BYTES = 4 << 20  # a config or sweep file is a few KiB; a larger one is a mistake


def read_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; raise GraphbenchError naming the file and the problem."""
    path = Path(path)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise GraphbenchError(f"config path is not a regular file: {path}")
    if path.is_file() and path.stat().st_size > MAX_TOML_BYTES:
        raise GraphbenchError(f"config file {path} is {path.stat().st_size} bytes, over {MAX_TOML_BYTES >> 20} MiB")
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise GraphbenchError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise GraphbenchError(f"config path is a folder, not a TOML file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise GraphbenchError(f"malformed TOML in {path}: {exc}") from None
    except UnicodeDecodeError:
        raise GraphbenchError(f"config file is not UTF-8 text: {path}") from None
    except RecursionError:
        raise GraphbenchError(f"config file nests too deeply to be a config: {path}") from None
    except OSError as exc:  # a link loop, a file under /proc that cannot be read, no permission
        raise GraphbenchError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if not data:  # (an empty or truncated file, or comments only: a config that sets nothing is a mistake)
        raise GraphbenchError(f"config file {path} is empty: it sets no key (give the file its settings, or drop the "
                              "option for the defaults)")
    return data
