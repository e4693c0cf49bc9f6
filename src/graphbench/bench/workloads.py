"""Workloads: closed-loop concurrency, Poisson open-loop at a rate, trace replay. Seeded, reproducible.

A workload expands to a list of RequestSpec(arrival_s, prompt_len, output_len); closed-loop
workloads have no arrival times (a request starts when one of the C in flight finishes).
"""

from __future__ import annotations

import functools
import json
import math
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from graphbench.ascii_numbers import plain
from graphbench.errors import GraphbenchError

KINDS = ("closed", "poisson", "trace")
# Bounds on what a workload may ask for: beyond them a run would not end, or not fit in memory
MAX_TOKENS = 1 << 20  # a prompt or output length
MAX_CONCURRENCY = 1 << 16
MAX_SEED = 2**40  # prompts are seeded with seed * 100003 + ..., which torch.Generator takes as an int64
MAX_REQUESTS = 1 << 20  # requests of one workload
MAX_TRACE_SPAN_S = 24 * 3600  # a trace is replayed in real time: a longer one is a mistake, not a benchmark
# Poisson rates a run can honour, requests/s: below one request in ~17 minutes the arrivals outlast any run
# (1e-300 overflowed the sleep: a traceback); above a million a second they all arrive at once
MIN_RATE, MAX_RATE = 1e-3, 1e6
MAX_TRACE_BYTES = 256 << 20


@dataclass(frozen=True)
class DefaultTraffic:
    """The workloads `run` and `sweep` measure when none are given: traffic that pads.

    Lengths are drawn per request, so requests of a closed loop finish on different steps and the
    decode batch walks down through off-rung sizes as a wave drains; the concurrency levels include
    off-rung ones (6 and 12 pad to 8 and 16 on the default ladder: 25% of the decode step, nothing
    on the interactivity ladder), and the Poisson point's batch size wanders around its mean in
    flight (Little's law: rate x request time). Closed loops run 3 x C requests (2 x C on the CPU).
    """

    concurrency: str
    request_rate: str
    prompt_len: str
    output_len: str
    requests_per_concurrency: int

    def options(self) -> dict[str, str]:
        """As `graphbench run` flags (name -> value)."""
        return {"concurrency": self.concurrency, "request-rate": self.request_rate, "prompt-len": self.prompt_len,
                "output-len": self.output_len, "num-requests-per-concurrency": str(self.requests_per_concurrency)}


# GPU: at rate 64/s a llama-3.2-1b request lasts ~60 ms under -O2 (52 steps of ~1.1 ms): ~4 in flight.
# Outputs stay <= 72 and closed loops run 3 x C requests: a static-batching peer runs each wave to its
# longest request, and the default H200 sweep with its peers must fit 10 minutes (with 4 x C requests,
# concurrency 20 and outputs <= 80 it took 588 s without hf-compile: benchmarks/RESULTS.md, 2026-12-01).
# Three rounds of every point must fit too: concurrency 12 (which paid the padding concurrency 6 shows)
# went to make room.
GPU_TRAFFIC = DefaultTraffic("1,6,64", "64", "uniform:64-192", "uniform:32-72", 3)
# CPU (tiny model, 2 cores): short enough that the README's main job stays within 3 minutes
CPU_TRAFFIC = DefaultTraffic("1,3,12", "100", "uniform:32-96", "uniform:8-24", 2)


def default_traffic(gpu: bool) -> DefaultTraffic:
    return GPU_TRAFFIC if gpu else CPU_TRAFFIC


@dataclass(frozen=True)
class LengthDist:
    """fixed:N | uniform:A-B | normal:MEAN,STD (clipped to >= 1)."""

    dist: str = "fixed"
    a: float = 128
    b: float = 0

    @classmethod
    def parse(cls, text: str | int, what: str) -> "LengthDist":
        text = str(text).strip()
        try:
            if not plain(text):  # (ascii_numbers.py)
                raise ValueError(text)
            if ":" not in text:
                return cls._checked("fixed", int(text), 0, what)
            kind, spec = text.split(":", 1)
            if kind == "fixed":
                return cls._checked("fixed", int(spec), 0, what)
            if kind == "uniform":
                lo, hi = (int(x) for x in spec.split("-"))
                if hi < lo:
                    raise ValueError
                return cls._checked("uniform", lo, hi, what)
            if kind == "normal":
                mean, std = (float(x) for x in spec.split(","))
                return cls._checked("normal", mean, std, what)
        except ValueError:
            pass
        raise GraphbenchError(f"{what} must look like 128, fixed:128, uniform:64-256 or normal:128,32; got {text!r}")

    @classmethod
    def _checked(cls, dist: str, a: float, b: float, what: str) -> "LengthDist":
        given = f"{a:g}" if dist == "fixed" else f"{dist}:{a:g}-{b:g}" if dist == "uniform" else f"{dist}:{a:g},{b:g}"
        if not (math.isfinite(a) and math.isfinite(b)):
            raise GraphbenchError(f"{what} must be finite numbers, got {given}")
        if a < 1:
            raise GraphbenchError(f"{what} must be at least 1 token, got {given}")
        if b < 0:  # (normal's standard deviation)
            raise GraphbenchError(f"{what}'s spread must be >= 0, got {given}")
        if a > MAX_TOKENS or b > MAX_TOKENS:
            raise GraphbenchError(f"{what} must stay within {MAX_TOKENS} tokens, got {given}")
        return cls(dist, a, b)

    def sample(self, rng: random.Random) -> int:
        if self.dist == "fixed":
            return int(self.a)
        if self.dist == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return max(1, round(rng.gauss(self.a, self.b)))

    def max(self) -> int:
        return int(self.a) if self.dist == "fixed" else int(self.b) if self.dist == "uniform" else int(self.a + 4 * self.b)

    def to_dict(self) -> dict[str, Any]:
        return {"dist": self.dist, "value": int(self.a)} if self.dist == "fixed" else asdict(self)

    def text(self) -> str:
        """As given on the command line: 128, uniform:64-256 or normal:128,32."""
        if self.dist == "fixed":
            return str(int(self.a))
        return f"uniform:{int(self.a)}-{int(self.b)}" if self.dist == "uniform" else f"normal:{self.a:g},{self.b:g}"


@dataclass(frozen=True)
class RequestSpec:
    arrival_s: float | None
    prompt_len: int
    output_len: int

    def capped_output_len(self, max_output_len: int | None) -> int:
        """output_len, at most max_output_len (None: no cap; the warm-up's shorter pass)."""
        return self.output_len if max_output_len is None else min(self.output_len, max_output_len)


PROMPT_KINDS = ("random", "repeated", "text")
REPEATED_SPAN = 16  # tokens in the span a repeated prompt repeats


@dataclass
class Workload:
    kind: str = "closed"
    concurrency: int = 1
    num_requests: int | None = None  # default: 4 x concurrency (closed) or 32 (open loop)
    request_rate: float | None = None  # requests/s for poisson
    prompt_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 128))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 64))
    trace: str | None = None
    seed: int = 0
    # random: uniform random token ids; repeated: a random span of REPEATED_SPAN tokens repeated to the
    # prompt's length (what an n-gram drafter finds something in: code edits, quoting, summaries); text:
    # windows of real text through the checkpoint's tokenizer, outputs ending at its eos (bench/prompts.py)
    prompt_kind: str = "random"
    # the fraction of requests that name a LoRA adapter (spread evenly, the loaded adapters in turn)
    lora_share: float = 0.0

    def __post_init__(self) -> None:
        share = self.lora_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise GraphbenchError(f"a LoRA share must be a number in [0, 1], got {share!r}")
        if self.prompt_kind not in PROMPT_KINDS:
            raise GraphbenchError(f"unknown prompt kind {self.prompt_kind!r}; choose from {', '.join(PROMPT_KINDS)}")
        if self.kind not in KINDS:
            raise GraphbenchError(f"unknown workload kind {self.kind!r}; choose from {', '.join(KINDS)}")
        if self.kind == "closed" and not 1 <= self.concurrency <= MAX_CONCURRENCY:
            raise GraphbenchError(f"concurrency must be in 1..{MAX_CONCURRENCY}, got {self.concurrency}")
        if self.kind == "poisson" and not (self.request_rate and MIN_RATE <= self.request_rate <= MAX_RATE):
            raise GraphbenchError(f"a poisson workload needs a --request-rate in [{MIN_RATE:g}, {MAX_RATE:g}] requests/s, "
                                  f"got {self.request_rate}")
        if self.kind == "trace" and not self.trace:
            raise GraphbenchError("a trace workload needs --trace FILE.jsonl")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise GraphbenchError(f"--workload-seed must be in 0..2**40, got {self.seed!r}")  # (x 100003: torch's int64)
        if self.num_requests is not None and not 1 <= self.num_requests <= MAX_REQUESTS:
            raise GraphbenchError(f"num_requests must be in 1..{MAX_REQUESTS}, got {self.num_requests}")

    @property
    def name(self) -> str:
        suffix = ("" if self.prompt_kind == "random" else f"-{self.prompt_kind}") + (
            f"-lora{self.lora_share:g}" if self.lora_share else "")
        if self.kind == "closed":
            return f"closed-c{self.concurrency}{suffix}"
        if self.kind == "poisson":
            return f"poisson-r{self.request_rate:g}{suffix}"
        return f"trace-{Path(self.trace).stem}{suffix}"

    def adapter_for(self, index: int, names: list[str]) -> str | None:
        """The adapter request `index` names: every 1/share-th request, the loaded adapters in turn."""
        if not self.lora_share:
            return None
        if not names:
            raise GraphbenchError(f"workload {self.name}: a LoRA share needs adapters (--lora-modules)")
        if math.floor((index + 1) * self.lora_share) == math.floor(index * self.lora_share):
            return None
        return names[(math.floor((index + 1) * self.lora_share) - 1) % len(names)]

    def requests(self) -> list[RequestSpec]:
        """The seeded request list (same seed, same requests, on any machine)."""
        if self.kind == "trace":
            return load_trace(self.trace)
        rng = random.Random(self.seed)
        count = self.num_requests or (4 * self.concurrency if self.kind == "closed" else 32)
        specs, clock = [], 0.0
        for _ in range(count):
            arrival = None
            if self.kind == "poisson":
                clock += rng.expovariate(self.request_rate)
                arrival = clock
            specs.append(RequestSpec(arrival, self.prompt_len.sample(rng), self.output_len.sample(rng)))
        return specs

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "concurrency": self.concurrency if self.kind == "closed" else None,
                "request_rate": self.request_rate, "prompt_len": self.prompt_len.to_dict(),
                "output_len": self.output_len.to_dict(), "num_requests": len(self.requests()), "seed": self.seed,
                "trace": self.trace, "prompt_kind": self.prompt_kind, "lora_share": self.lora_share}


def load_trace(path: str | Path) -> list[RequestSpec]:
    """The requests to replay, sorted by arrival, the first at 0: JSONL lines {"arrival_s": float, "prompt_len": int,
    "output_len": int}, or a `vllm bench serve --save-result --save-detailed` result (its successful requests
    at their recorded send times, start_times; all at once where it sent them so: rate inf, no cap)."""
    path = Path(path)
    if not path.exists():
        raise GraphbenchError(f"trace file not found: {path}")
    if not path.is_file():
        raise GraphbenchError(f"trace {path} is not a regular file")
    stat = path.stat()
    if stat.st_size > MAX_TRACE_BYTES:
        raise GraphbenchError(f"trace {path} is {stat.st_size} bytes, over {MAX_TRACE_BYTES >> 20} MiB")
    return list(_parsed_trace(path, path.resolve(), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parsed_trace(path: Path, resolved: Path, mtime_ns: int, size: int) -> tuple[RequestSpec, ...]:
    """load_trace's requests, parsed once a version of the file: a run checks a trace before its start-up,
    checks its lengths against the model and replays it (a file of up to 256 MiB)."""
    from graphbench.ladders.request_trace import check_not_a_result, is_bench_serve_text

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GraphbenchError(f"trace {path} is not UTF-8 text") from None
    check_not_a_result(text, f"trace {path}", "a request trace")
    specs = _bench_serve_requests(text, path) if is_bench_serve_text(text) else _jsonl_requests(text, path)
    if not specs:
        raise GraphbenchError(f"trace {path} holds no requests")
    if len(specs) > MAX_REQUESTS:
        raise GraphbenchError(f"trace {path} holds more than {MAX_REQUESTS} requests")
    # the replay starts at the first request (an excerpt of a day's log starts hours in: it waited them out)
    first = min(s.arrival_s for s in specs)
    span = max(s.arrival_s for s in specs) - first
    if span > MAX_TRACE_SPAN_S:
        raise GraphbenchError(f"trace {path} spans {span / 3600:.1f} h from its first request to its last, replayed "
                              f"in real time: more than {MAX_TRACE_SPAN_S // 3600} h; give an excerpt")
    return tuple(sorted((replace(s, arrival_s=s.arrival_s - first) for s in specs),
                        key=lambda s: s.arrival_s))


def _jsonl_requests(text: str, path: Path) -> list[RequestSpec]:
    specs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}: expected arrival_s, prompt_len, output_len"
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:  # bad JSON, or an integer of more digits than Python converts
            raise GraphbenchError(f"{where} as one JSON object a line (JSON Lines): {exc}") from None
        if not isinstance(row, dict):  # (e.g. a JSON array of the requests)
            raise GraphbenchError(f"{where} as one JSON object a line (JSON Lines), got a {type(row).__name__}")
        if missing := [k for k in ("arrival_s", "prompt_len", "output_len") if k not in row]:
            raise GraphbenchError(f"{where}: the request lacks {', '.join(missing)}")
        specs.append(_request(row["arrival_s"], row["prompt_len"], row["output_len"], f"{path}:{number}"))
        if len(specs) > MAX_REQUESTS:
            break
    return specs


def _bench_serve_requests(text: str, path: Path) -> list[RequestSpec]:
    from graphbench.ladders.request_trace import parse_request_trace

    traces = parse_request_trace(text, str(path))
    if len(traces) != 1:
        raise GraphbenchError(f"trace {path} holds {len(traces)} vLLM bench serve results (--append-result): "
                              "replay one, a file each")
    trace = traces[0]
    arrivals = trace.arrival_s
    if arrivals is None:
        if trace.request_rate is not None or trace.max_concurrency is not None:
            vllm = trace.tool == "vLLM bench serve"
            raise GraphbenchError(
                f"trace {path}: a result of {trace.tool} without start_times{' (an older vLLM)' if vllm else ''}, sent "
                f"at {trace.request_rate or 'inf'} requests/s with max_concurrency {trace.max_concurrency}: its send "
                f"times are unknown. {'Rerun it with a vLLM that saves start_times, or replay' if vllm else 'Replay'} "
                "its traffic with --request-rate or --concurrency and --prompt-len / --output-len")
        arrivals = (0.0,) * len(trace)  # rate inf, no cap: vLLM sent every request at once
    return [_request(a, p, o, f"{path}: request {i}")
            for i, (a, p, o) in enumerate(zip(arrivals, trace.input_lens, trace.output_lens))]


def _request(arrival: object, prompt: object, output: object, where: str) -> RequestSpec:
    if isinstance(arrival, bool) or not isinstance(arrival, (int, float)) or not 0 <= arrival < 1e9:
        raise GraphbenchError(f"{where}: arrival_s must be a number of seconds in [0, 1e9), got {arrival!r}")
    for name, value in (("prompt_len", prompt), ("output_len", output)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
            raise GraphbenchError(f"{where}: {name} must be an integer in 1..{MAX_TOKENS}, got {value!r}")
    return RequestSpec(float(arrival), prompt, output)
