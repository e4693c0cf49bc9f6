"""The engine: startup (weights, KV cache), continuous-batching steps, generate().

    engine = Engine(load_engine_config(overrides={"model.model": "tiny-llama"}))
    outputs = engine.generate([[1, 2, 3]], SamplingParams(max_tokens=16))
"""

from __future__ import annotations

import dataclasses
import gc
import itertools
import logging
import time

import torch

from graphbench.config import CompileMode, CUDAGraphMode, EngineConfig, load_arch
from graphbench.errors import GraphbenchError
from graphbench.runner.attention.selection import create_backend
from graphbench.runner.compile.compiler import CompiledForward
from graphbench.runner.compile.startup import sign_cache_entry
from graphbench.runner.inputs import StepInputs
from graphbench.runner.block_allocator import BlockAllocator
from graphbench.runner.engine_startup import (
    capture_graphs,
    load_model,
    make_dispatcher,
    pay_cublas_setup,
    pay_graph_setup,
    resolve_engine_config,
    start_compiled,
    start_speculative,
    start_tensor_parallel,
)
from graphbench.runner.kv_startup import allocate_kv_cache, grow_after_capture
from graphbench.runner.model_runner import ModelRunner
from graphbench.runner.parallel import (
    close_tensor_parallel,
)
from graphbench.runner.request import PENDING_TOKEN, Request, RequestStatus, SamplingParams, check_prompt
from graphbench.runner.records import StartupReport, StepClock, StepRecord
from graphbench.runner.scheduler import Scheduler
from graphbench.runner.speculative.decoding import speculative_step

log = logging.getLogger("graphbench.engine")


class Engine:
    def __init__(self, config: EngineConfig, *, fresh_compile: bool = False):
        """Start the engine. fresh_compile: clear this config's compile cache first (a cold start)."""
        started = time.perf_counter()
        self._fresh_compile = fresh_compile
        resolve_engine_config(self, config)
        self.arch = load_arch(self.config.model.model)
        sched = self.config.scheduler
        self.max_model_len = sched.max_model_len or self.arch.max_position_embeddings
        self.report = StartupReport()
        start_tensor_parallel(self)

        load_model(self)
        pay_cublas_setup(self)

        t0 = time.perf_counter()
        self.backend = create_backend(self.config.model.attention_backend, self.device.type)
        block_size = self.config.cache.block_size
        self.kv_cache = allocate_kv_cache(self, block_size)
        self.report.kv_cache_seconds = time.perf_counter() - t0

        self.dispatcher = make_dispatcher(self)
        self.speculative = start_speculative(self)
        max_blocks_per_seq = -(-self.max_model_len // block_size)
        self.inputs = StepInputs(sched.max_num_batched_tokens, sched.max_num_seqs, max_blocks_per_seq,
                                 block_size, self.device)
        if self.lora_slots:
            self.inputs.lora_token_slots = self.model.lora_token_slots
        self.runner = ModelRunner(self.model, self.kv_cache, self.backend, self.inputs, self.config.model.seed,
                                  self.dispatcher)
        self.compiled: CompiledForward | None = None
        pay_graph_setup(self)
        if self.config.compilation.mode == CompileMode.COMPILE:
            start_compiled(self)
        if self.dispatcher.mode != CUDAGraphMode.NONE:
            capture_graphs(self)
        if self.compiled is not None:
            sign_cache_entry(self)
        if self.kv_cache.arena is not None:
            self.report.kv_cache_seconds += grow_after_capture(self)
        num_blocks = self.kv_cache.num_blocks
        self.report.num_kv_blocks, self.report.num_kv_tokens = num_blocks, num_blocks * block_size
        self.report.kv_cache_bytes = self.kv_cache.device_bytes(self.local_arch, self.dtype)
        self.allocator = BlockAllocator(num_blocks)
        self.scheduler = Scheduler(
            self.allocator, block_size, sched.max_num_seqs, sched.max_num_batched_tokens,
            self.config.decode_query_len, sched.enable_chunked_prefill,
            drafts=self.speculative.drafts if self.speculative is not None else None,
            lora=self._lora_keys())
        if self.device.type == "cuda" and self.config.model.kernels == "graphbench" and not self.report.kernel_choices:
            from graphbench.runner.kernel_timing import without_entry

            self.report.kernel_choices = without_entry(self.model)  # no cache entry (-O0): nothing timed
        self.records: list[StepRecord] = []
        self._in_flight = None  # the launched step whose tokens are not on the host yet
        self.step_clock = StepClock()
        self._ids = itertools.count()
        self.report.total_seconds = time.perf_counter() - started
        log.info("KV cache: %d blocks of %d = %d tokens", num_blocks, block_size, num_blocks * block_size)

    # -- startup ---------------------------------------------------------------------------

    def _mirror(self, command: str, *args) -> None:
        """Driver of a tensor-parallel group: have every worker make the same call (before this rank)."""
        if self.workers is not None:
            self.workers.send(command, *args)

    def close(self) -> None:
        """Stop the tensor-parallel workers, leave the process group and give the device memory back
        (weights, KV cache, CUDA graphs), so that another engine can start in this process. The
        report and the step records stay; the engine cannot run any more."""
        workers, self.workers = getattr(self, "workers", None), None
        if workers is not None:
            workers.close()
            close_tensor_parallel()
        if getattr(self, "runner", None) is None:
            return
        if self.compiled is not None:
            self.compiled.backend.release()
        kv_cache = self.kv_cache
        for holder in ("runner", "compiled", "model", "kv_cache", "inputs", "backend", "scheduler", "_in_flight"):
            setattr(self, holder, None)
        gc.collect()  # (the compiled forward and its pieces refer to one another)
        if kv_cache is not None:
            kv_cache.release()  # (a reserved cache's memory is not torch's: it goes back now, not with its tensors)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _require_open(self) -> None:
        if self.runner is None:
            raise GraphbenchError("this engine is closed: start a new one")

    def _lora_keys(self) -> str | None:
        if not self.lora_slots:
            return None
        return "specialize" if self.config.lora.cudagraph_specialize_lora else "always"

    # -- requests and steps ------------------------------------------------------------------

    def add_request(self, prompt_token_ids: list[int], sampling: SamplingParams | None = None,
                    lora: str | None = None) -> Request:
        """Queue a request (lora: the name of a loaded adapter, or None); reject prompts that can never run."""
        self._require_open()
        sampling = sampling or SamplingParams()
        if lora is not None and lora not in self.lora_slots:
            known = ", ".join(self.lora_slots) or "none loaded"
            raise GraphbenchError(f"unknown LoRA adapter {lora!r} (adapters: {known})")
        check_prompt(prompt_token_ids, sampling.max_tokens, self.arch.vocab_size, self.max_model_len,
                     self.kv_cache.block_size, self.kv_cache.num_blocks)
        self._mirror("add", list(prompt_token_ids), dataclasses.asdict(sampling))
        request = Request(next(self._ids), list(prompt_token_ids), sampling, arrival_time=time.perf_counter(),
                          lora_slot=self.lora_slots.get(lora, 0) if lora is not None else 0)
        self.scheduler.add(request)
        return request

    def has_unfinished(self) -> bool:
        return self.scheduler is not None and self.scheduler.has_unfinished()

    def step(self) -> list[Request]:
        """Run one scheduled batch; return the requests that finished.

        With asynchronous scheduling (the default on a GPU) a step launches its batch on the device and then
        takes in the previous step's tokens, so the host's work overlaps the device's; a request's
        tokens then come back one step later, and one stopped by EOS may compute one extra token
        (dropped). Without it, a step waits for its own tokens.
        """
        self._require_open()
        if self.speculative is not None:
            return self._speculative_step()
        self._mirror("step")
        started = time.perf_counter()
        batch = self.scheduler.schedule()
        launched = self.runner.launch(batch) if batch is not None else None
        launch_seconds = time.perf_counter() - started
        if launched is not None:
            self.scheduler.update(batch)
            fills = launched.fills
            for row, request in enumerate(batch.requests):
                outputs = request.output_token_ids
                # not a partial prefill chunk (Request.num_tokens, inline: this runs for every request)
                if request.num_computed_tokens >= len(request.prompt_token_ids) + len(outputs):
                    outputs.append(PENDING_TOKEN)
                    request.pending_row = row
                    fills.append((request, row, len(outputs) - 1))
        finished = self._drain()
        if launched is not None:
            if self.config.scheduler.async_scheduling:
                self._in_flight = launched
            else:
                finished += self._take_tokens(launched)
            seconds = self.step_clock.lap(started, self.scheduler.has_unfinished())
            self.records.append(StepRecord(batch.descriptor, seconds, launched.runtime_mode.value,
                                           launched.padded_tokens, launch_seconds, self.runner.take_capture_stall()))
            return finished
        self.step_clock.ended(self.scheduler.has_unfinished())
        if not finished and self.scheduler.has_unfinished():
            raise GraphbenchError("the scheduler cannot make progress: the KV cache is too small for any waiting request")
        return finished

    def _speculative_step(self) -> list[Request]:
        return speculative_step(self)

    def drain(self) -> list[Request]:
        """Take in the tokens of a launched step still in flight (asynchronous scheduling); finished requests."""
        self._mirror("drain")
        finished = self._drain()
        if not self.scheduler.has_unfinished():  # the last tokens taken: a wait from here is no step's time
            self.step_clock.ended(busy=False)
        return finished

    def _drain(self) -> list[Request]:
        step, self._in_flight = self._in_flight, None
        return self._take_tokens(step) if step is not None else []

    def _take_tokens(self, step) -> list[Request]:
        """Wait for a launched step's tokens and put them in place of their placeholders."""
        tokens = step.result().tokens
        now = time.perf_counter()
        finished = []
        finished_status = RequestStatus.FINISHED
        for request, row, index in step.fills:  # (every request of a step: its attributes are read once)
            if request.status is finished_status:
                continue  # stopped by EOS a step earlier: this extra token is dropped
            outputs, sampling = request.output_token_ids, request.sampling
            token = outputs[index] = tokens[row]
            if index == len(outputs) - 1:
                request.pending_row = None  # no newer placeholder: nothing left to gather on the device
            request.token_times.append(now)
            if request.first_token_time is None:
                request.first_token_time = now
            eos = request.stops_at(token)
            if eos:
                del outputs[index + 1:]  # a placeholder launched after the stop
            if eos or index + 1 >= sampling.max_tokens:
                request.finish_time, request.finish_reason = now, "stop" if eos else "length"
                self.scheduler.finish(request)
                finished.append(request)
        return finished

    @torch.inference_mode()
    def prompt_logits(self, prompts: list[list[int]], loras: list[str | None] | None = None) -> list[torch.Tensor]:
        """Logits[len(p), V] (float32) at every prompt position, all prompts in one flat batch."""
        self._require_open()
        self._mirror("prompt_logits", prompts)
        self._drain()
        workers, self.workers = self.workers, None  # the workers run their own prompt_logits: no nested calls
        try:
            requests = [self.add_request(p, SamplingParams(max_tokens=1), lora)
                        for p, lora in zip(prompts, loras or [None] * len(prompts))]
        finally:
            self.workers = workers
        batch = self.scheduler.schedule()
        if batch is None or batch.requests != requests or batch.num_tokens != sum(map(len, prompts)):
            raise GraphbenchError("prompt_logits needs all prompts to fit in one batch (max_num_batched_tokens)")
        meta = self.inputs.prepare(batch)
        logits = self.model.compute_logits(self.runner.forward(batch.num_tokens, meta))
        for request in requests:
            self.scheduler.finish(request)
        return list(logits.split([len(p) for p in prompts]))

    def generate(self, prompts: list[list[int]], sampling: SamplingParams | None = None,
                 loras: list[str | None] | None = None) -> list[list[int]]:
        """Generate for every prompt (continuous batching; loras: each prompt's adapter or None); returns
        output token ids in prompt order."""
        return [r.output_token_ids for r in self.generate_requests(prompts, sampling, loras)]

    def generate_requests(self, prompts: list[list[int]], sampling: SamplingParams | None = None,
                          loras: list[str | None] | None = None) -> list[Request]:
        """As generate, returning the finished requests (their tokens, finish_reason and times)."""
        requests = [self.add_request(p, sampling, lora) for p, lora in zip(prompts, loras or [None] * len(prompts))]
        while self.has_unfinished():
            self.step()
        return requests
