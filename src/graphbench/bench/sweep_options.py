"""What a `graphbench sweep` command asks for, checked and planned before anything runs (no printing).

`plan_sweep(SweepRequest)` validates the options, builds the grid (sweep_grid), fills the workload
defaults for the device (workloads.default_traffic) and plans the processes (sweep_plan.plan_rounds): the
CLI parses, calls it, and renders.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

from graphbench.ascii_numbers import plain
from graphbench.errors import GraphbenchError

EXECUTORS = ("local", "ray")
MAX_ROUNDS = 100
# Processes per graphbench point by default. On a CPU a process's speed is bimodal: on a 2-core host a quarter
# of -O0's sweep processes ran ~15% slower than the rest, each for its whole life (2026-12-06: 5 of 21); a
# side of 3 processes all in one mode made the noise floor miss the other, and an A/A pair of the README's
# main job failed the gate (-12.7% against a noise floor of 7.9%). Resampling those 21 processes, an A/A
# comparison alarms 0.6-1.0% of the time at 3 a side and 0-0.1% at 5 (benchmarks/RESULTS.md, 2026-12-06,
# the README's main job on a CPU after the step clock). A GPU's A/A sweeps agreed at 3.
GPU_ROUNDS, CPU_ROUNDS = 3, 5
# The most grid points a sweep plans: at ~15 s a process and 3 rounds, 4096 points are over two days of one
# GPU; a grid of 9 axes x 10 values (10^9 points) hung even --dry-run before this bound.
MAX_POINTS = 4096


@dataclass
class SweepRequest:
    """The sweep command's options (names as the CLI's parameters)."""

    model: str = "tiny-llama"
    levels: str = "0,1,2,3"
    ladders: str = "default,interactivity"
    grid: Optional[list[str]] = None
    sweep_file: Optional[Path] = None
    peers: Optional[str] = None
    device: str = "auto"
    concurrency: Optional[str] = None
    prompt_len: Optional[str] = None
    output_len: Optional[str] = None
    num_requests: Optional[int] = None
    repeats: int = 2
    rounds: Optional[int] = None  # GPU_ROUNDS or CPU_ROUNDS
    order_seed: Optional[int] = None
    aa: bool = False
    prompt_kind: Optional[str] = None
    lora_share: Optional[str] = None
    target_repeat_s: Optional[float] = None
    max_num_seqs: Optional[int] = None
    results: Path = Path("results")
    timeout: float = 1200
    gpus: Optional[str] = None
    executor: str = "local"
    ray_address: Optional[str] = None

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> "SweepRequest":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in options.items() if k in names})


@dataclass
class SweepPlan:
    points: list  # SweepPoint, one per grid point and peer
    planned: list  # the processes, in order (sweep_plan.plan_rounds)
    run_values: dict[str, str]  # each process's `graphbench run` workload options
    seed: int
    folders: tuple[str, ...]
    gpu: bool
    gpu_ids: list[str] = field(default_factory=list)
    rounds: int = GPU_ROUNDS  # processes per graphbench point

    @property
    def run_args(self) -> list[str]:
        return [arg for key, value in self.run_values.items() for arg in (f"--{key}", str(value))]


def _check_executor(r: SweepRequest, gpu_ids: list[str]) -> None:
    if r.executor not in EXECUTORS:
        raise GraphbenchError(f"--executor must be local or ray, got {r.executor!r}")
    if r.executor == "local" and r.ray_address is not None:
        raise GraphbenchError("--ray-address needs --executor ray")
    if r.executor == "ray" and gpu_ids:
        raise GraphbenchError("--gpus is for --executor local: on Ray each point asks for the GPUs it needs")


def _check_numbers(r: SweepRequest) -> None:
    if not 0 < r.timeout <= 7 * 86400:  # (NaN fails this too: it would switch every timeout off)
        raise GraphbenchError(f"--timeout must be in (0, 604800] seconds, got {r.timeout:g}")
    for name, text in (("--levels", r.levels), ("--ladders", r.ladders)):
        if not _parse_values(text):
            raise GraphbenchError(f"{name} names nothing (got {text!r}): give at least one, e.g. --levels 2")
    if r.max_num_seqs is not None and r.max_num_seqs < 1:
        raise GraphbenchError(f"--max-num-seqs must be >= 1, got {r.max_num_seqs}")
    if r.num_requests is not None and r.num_requests < 1:  # (0 had read as "not given": the default traffic's)
        raise GraphbenchError(f"--num-requests must be >= 1, got {r.num_requests}")
    if r.order_seed is not None and not 0 <= r.order_seed < 2**63:  # (as run's --seed)
        raise GraphbenchError(f"--order-seed must be in 0..2**63-1, got {r.order_seed}")
    if r.rounds is not None and not 1 <= r.rounds <= MAX_ROUNDS:
        raise GraphbenchError(f"--rounds must be in 1..{MAX_ROUNDS}, got {r.rounds}")


def _grid(r: SweepRequest, gpu: bool) -> tuple[list, dict]:
    """The grid's points and the sweep file's workload table."""
    from graphbench.bench.sweep_grid import build_grid, canonical_axis, load_sweep_file

    base: dict = {"model.model": r.model, "model.device": r.device}
    axes: dict[str, list] = {"level": _parse_values(r.levels), "ladder": _parse_values(r.ladders)}
    workload: dict = {}
    if r.sweep_file is not None:
        file_base, file_grid, workload = load_sweep_file(r.sweep_file)
        base.update(file_base)
        axes = dict(file_grid) or axes
    given = {canonical_axis(name): name for name in axes}  # --levels / --ladders (or the sweep file's axes)
    explicit = {canonical_axis("level"): r.levels != SweepRequest.levels,
                canonical_axis("ladder"): r.ladders != SweepRequest.ladders}
    seen: dict[str, str] = {}
    for item in r.grid or []:
        if "=" not in item:
            raise GraphbenchError(f"--grid must look like FIELD=v1,v2; got {item!r}")
        name, values = item.split("=", 1)
        if not _parse_values(values):
            raise GraphbenchError(f"--grid {name.strip()}= names no value: give at least one, e.g. {name.strip()}=64")
        key = canonical_axis(name.strip())
        if key in seen:
            raise GraphbenchError(f"--grid names {key} twice ({seen[key]!r} and {name.strip()!r}): give its values once")
        if explicit.get(key):
            raise GraphbenchError(f"--grid {name.strip()}=... and --{'levels' if 'level' in key else 'ladders'} both "
                                  "set one axis: give one of them")
        seen[key] = name.strip()
        axes.pop(given.get(key, ""), None)  # the -g axis replaces the default --levels / --ladders
        axes[name.strip()] = _parse_values(values)
    size = 1
    for name, values in axes.items():
        size *= max(1, len(values))
        if size > MAX_POINTS:
            shown = " x ".join(f"{len(v)} {k}" for k, v in axes.items() if v)
            raise GraphbenchError(f"the grid has more than {MAX_POINTS} points ({shown}): split it into sweeps "
                                  "of fewer axes or values")
    base.setdefault("scheduler.max_num_seqs", r.max_num_seqs or (256 if gpu else 64))
    if r.max_num_seqs:
        base["scheduler.max_num_seqs"] = r.max_num_seqs
    peer_list = _parse_peers(r.peers if r.peers is not None else workload.pop("peers", None), gpu)
    points = build_grid(base, {k: v for k, v in axes.items() if v}, peer_list, graphs_possible=gpu)
    _check_tuned_points(points, r.results)
    return points, workload


def plan_sweep(r: SweepRequest) -> SweepPlan:
    """The sweep's points, processes and workload options; GraphbenchError for what a point would refuse."""
    from graphbench.bench.sweep_plan import plan_rounds
    from graphbench.bench.sweep_parallel import parse_gpus

    gpu_ids = parse_gpus(r.gpus)
    _check_executor(r, gpu_ids)
    gpu = _has_gpu(r.device) if r.executor == "local" else _cluster_has_gpu(r.device, r.ray_address)
    if gpu_ids and not gpu:
        raise GraphbenchError(f"--gpus {r.gpus}: no CUDA GPU is visible{' (--device cpu)' if r.device == 'cpu' else ''}")
    _check_numbers(r)
    points, workload = _grid(r, gpu)
    run_values = _run_values(workload, r.concurrency, r.prompt_len, r.output_len, r.num_requests, r.repeats, gpu,
                             r.target_repeat_s, r.prompt_kind, r.lora_share)
    if run_values.get("prompt-kind") == "text":  # every point's checkpoint has a tokenizer, before anything runs
        from graphbench.checkpoints.text import load_text

        for model in dict.fromkeys(p.overrides.get("model.model", r.model) for p in points):
            load_text(model)
    seed = r.order_seed if r.order_seed is not None else random.SystemRandom().randrange(2**31)
    folders = ("a", "b") if r.aa else ("",)
    rounds = r.rounds if r.rounds is not None else GPU_ROUNDS if gpu else CPU_ROUNDS
    return SweepPlan(points, plan_rounds(points, rounds, seed, "", folders), run_values, seed, folders, gpu, gpu_ids,
                     rounds)


def _parse_values(text: str) -> list:
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not plain(part):  # a name, never a number (ascii_numbers.py)
            values.append(part)
            continue
        try:
            values.append(int(part))
        except ValueError:
            try:
                values.append(float(part))
            except ValueError:
                values.append(part)
    return values


def _has_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _cluster_has_gpu(device: str, address: Optional[str]) -> bool:
    """Whether the sweep's points get GPUs on the Ray cluster (the grid's CUDA-graph rules follow it)."""
    from graphbench.bench.sweep_ray import connect

    return device != "cpu" and any(count > 0 for count in connect(address).values())


def _parse_peers(text, gpu: bool) -> list[str]:
    if text is None:
        # the peer in its fastest configuration (transformers' static cache + torch.compile); hf-eager on request
        return ["hf-compile"] if gpu else []
    if isinstance(text, list):
        return text
    return [] if text.strip().lower() in ("", "none") else [p.strip() for p in text.split(",") if p.strip()]


def _check_tuned_points(points: list, results: Path) -> None:
    """A tuned:N ladder is tuned from batch sizes measured before it: in this sweep or in the folder."""
    from graphbench.reports.store import load_results

    first = next((i for i, p in enumerate(points) if p.tuned_graphs is not None), None)
    if first is None or any(p.system == "graphbench" and p.tuned_graphs is None for p in points[:first]):
        return
    if results.is_dir() and any(r.get("status") == "ok" and r.get("system") == "graphbench"
                                for r in load_results([results]).results):
        return
    raise GraphbenchError(f"{points[first].label}: a tuned:N ladder is tuned from the batch sizes measured before it; "
                          "put a default or interactivity ladder first (--ladders default,tuned:N)")


def _run_values(workload: dict, concurrency, prompt_len, output_len, num_requests, repeats: int, gpu: bool,
                target_repeat_s: float | None = None, prompt_kind: str | None = None,
                lora_share: str | None = None) -> dict[str, str]:
    """Each point's `graphbench run` workload options (flag name -> value), defaults filled in: the
    default traffic (bench/workloads.py) unless closed-loop levels or rates were given."""
    from graphbench.bench.workloads import default_traffic

    traffic = default_traffic(gpu)
    if target_repeat_s is None:
        target_repeat_s = workload.get("target_repeat_s", 0.0)
    closed = concurrency or workload.get("concurrency")
    rates = workload.get("request_rate")
    if not closed and not rates:
        closed, rates = traffic.concurrency, traffic.request_rate
    values = {
        "concurrency": closed,
        "prompt-len": prompt_len or workload.get("prompt_len") or traffic.prompt_len,
        "output-len": output_len or workload.get("output_len") or traffic.output_len,
        "repeats": str(workload.get("repeats", repeats)),
        "target-repeat-s": f"{float(target_repeat_s):g}",
    }
    if isinstance(values["concurrency"], list):
        values["concurrency"] = ",".join(map(str, values["concurrency"]))
    if not values["concurrency"]:
        del values["concurrency"]
    if num_requests or workload.get("num_requests"):
        values["num-requests"] = str(num_requests or workload["num_requests"])
    else:
        values["num-requests-per-concurrency"] = str(traffic.requests_per_concurrency)
    if rates:
        values["request-rate"] = ",".join(map(str, rates)) if isinstance(rates, list) else str(rates)
    kind = prompt_kind or workload.get("prompt_kind")
    if kind and kind != "random":
        values["prompt-kind"] = kind
    shares = lora_share or workload.get("lora_share")
    if shares:
        values["lora-share"] = ",".join(map(str, shares)) if isinstance(shares, list) else str(shares)
    return {key: str(value) for key, value in values.items()}
