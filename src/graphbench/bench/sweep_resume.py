"""What `--resume` counts: a sweep's id (its rounds' files merge by it), what a point is measured with (its
identity), the identities the results folder already holds, and why a point measured before runs again."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from graphbench.bench.sweep_grid import SweepPoint
from graphbench.errors import GraphbenchError
from graphbench.reports.aliases import stands_for
from graphbench.reports.store import load_results


def sweep_id_for(results_dir: Path, resume: bool) -> str:
    """This sweep's id (its round files merge by it): a new one, or with --resume the interrupted sweep's."""
    path = results_dir / ".sweep" / "sweep-id"
    if resume and path.is_file():
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            text = ""  # unreadable: a new id (the earlier rounds' results still count for --resume)
        if re.fullmatch(r"[0-9A-Za-z_-]{1,64}", text):
            return text
    new = uuid.uuid4().hex[:12]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new + "\n")
    except OSError as exc:
        raise GraphbenchError(f"results folder {results_dir}: cannot write {path}: {exc.strerror or exc}") from None
    return new


def point_identity(point: SweepPoint, run_args: list[str]) -> dict[str, Any]:
    """What a point is measured with: its system, config overrides (a tuned:N ladder as N, before
    tuning), its `graphbench run` options (workloads, repeats) and graphbench's version. --resume
    counts a result only when it was measured with the very same (as JSON would give it back)."""
    from graphbench import __version__

    return json.loads(json.dumps({"system": point.system, "config": dict(sorted(point.overrides.items())),
                                  "tuned_graphs": point.tuned_graphs, "run": list(run_args),
                                  "graphbench": __version__}, default=str))


def measured_identities(results_dir: Path, folders: tuple[str, ...] = ("",)) -> dict[tuple[str, str, int], Any]:
    """(folder, label, round) -> the identity its ok result recorded (None for a result that recorded
    none), the labels a result stands for included; a result outside rounds counts as round 1."""
    out: dict[tuple[str, str, int], Any] = {}
    for folder in folders:
        where = results_dir / folder if folder else results_dir
        if not where.exists():
            continue
        for r in load_results([where], merge=False).results:
            if r.get("status") == "ok":
                sweep = r.get("sweep") if isinstance(r.get("sweep"), dict) else {}
                identity = sweep.get("identity")
                index = (sweep.get("round") or {}).get("index", 1) if isinstance(sweep.get("round"), dict) else 1
                out.update({(folder, label, index): identity for label in [r["label"], *stands_for(r)]})
    return out


def rerun_reason(identity: dict[str, Any], recorded: Any) -> str:
    """Why a point measured before is measured again ('' when its result is this very point)."""
    if recorded == identity:
        return ""
    if not isinstance(recorded, dict):
        return "re-measured (--resume): its result does not record what it was measured with"
    names = {"run": "workload options or repeats", "config": "config", "tuned_graphs": "tuned ladder",
             "graphbench": "graphbench version", "system": "system"}
    differ = [names[key] for key in names if recorded.get(key) != identity[key]]
    return f"re-measured (--resume): its result was measured with another {', '.join(differ) or 'identity'}"
