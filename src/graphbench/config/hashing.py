"""Stable hashing of the factors that change generated code (docs/MACHINERY.md §1.6)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def hash_factors(factors: Any) -> str:
    """Return a short, stable hex digest of a JSON-serialisable factor structure."""
    text = json.dumps(factors, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:10]
