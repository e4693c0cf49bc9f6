"""Runs one scheduled batch: dispatch to a recording or eager, fill static buffers, forward, sample.

Start-up order (Engine): compile (first call traces + compiles), warm up the compile_sizes,
then capture every dispatcher key largest first.
"""

from __future__ import annotations

import gc
import logging
import time

import torch

from graphbench.config.modes import CUDAGraphMode
from graphbench.runner.attention.backend import AttentionBackend
from graphbench.runner.attention.op import ForwardContext, forward_context
from graphbench.runner.cudagraph import (CaptureReport, CUDAGraphWrapper, capture_session, graph_launches_if_triton,
                                         graph_runtime, runtime, warmup_batches)
from graphbench.runner.dispatcher import CudagraphDispatcher
from graphbench.runner.in_flight import InFlightStep
from graphbench.runner.inputs import StepInputs
from graphbench.runner.kernel_bench import precompile
from graphbench.runner.kv_cache import KVCache
from graphbench.runner.lora.weights import set_adapters_active
from graphbench.runner.model import CausalLM
from graphbench.runner.sampler import greedy, mark_nan_rows, sample, triton_argmax_applies
from graphbench.runner.scheduler import BatchDescriptor, ScheduledBatch

NONE, FULL = CUDAGraphMode.NONE, CUDAGraphMode.FULL
log = logging.getLogger("graphbench.engine")


class ModelRunner:
    def __init__(self, model: CausalLM, kv_cache: KVCache, backend: AttentionBackend, inputs: StepInputs,
                 seed: int, dispatcher: CudagraphDispatcher, forward_fn=None):
        self.model = model
        self.kv_cache = kv_cache
        self.backend = backend
        self.inputs = inputs
        self.device = inputs.device
        self.scale = model.arch.head_dim ** -0.5
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.dispatcher = dispatcher
        self.forward_fn = forward_fn or model  # the eager module, or the compiled forward once started
        self.full_graph = CUDAGraphWrapper(self._call_forward, FULL, "full") if dispatcher.keys[FULL] else None
        # the recordings' stream (engine_startup.pay_graph_setup makes its cuBLAS workspace before them)
        self.capture_stream = torch.cuda.Stream(device=self.device) if self.device.type == "cuda" else None
        # capture on demand: the keys recorded (None: every key, or no capture), what a deferred key does
        # when a step first needs it (record it then, or run eager), and what those recordings cost
        self.recorded: set | None = None
        self.record_deferred = True
        self.capture_stall_seconds = 0.0
        self.deferred_log: list[list] = []  # [mode, tokens, seconds] per key recorded on demand
        max_reqs = inputs.max_num_reqs
        self._temperatures = torch.zeros(max_reqs, dtype=torch.float32, device=self.device)
        self._top_ps = torch.ones(max_reqs, dtype=torch.float32, device=self.device)
        # the last step's sampled ids on the device (the next step's pending input tokens come from here:
        # the inputs' buffer) and two pinned host buffers used in turn for copying them back
        self.sampled_ids = inputs.sampled_ids
        self._marked_ids = torch.zeros(max_reqs, dtype=torch.int64, device=self.device)  # what the host reads
        pin = self.device.type == "cuda"
        self._host_ids = [torch.zeros(max_reqs, dtype=torch.int64, pin_memory=pin) for _ in range(2)]
        self._copied = [torch.cuda.Event() for _ in range(2)] if pin else [None, None]  # one per host buffer
        self._host_turn = 0
        self.recorded_logits: torch.Tensor | None = None  # the last replayed FULL recording's, where it samples
        # the recorded greedy pick's stage-1 buffers, the recordings' own (made before the first capture)
        self._argmax_workspace: tuple[torch.Tensor, torch.Tensor] | None = None

    def _call_forward(self, input_ids: torch.Tensor, positions: torch.Tensor):
        """The FULL recordings' callable: the packed inputs' unpack (inputs.unpack_recorded), the forward, and for
        a uniform decode key also lm_head and the greedy pick over its rows -> (hidden, logits). Eager, the unpack,
        lm_head and argmax were four Triton launches and ~0.16 ms of a decode step's host time on an H200 machine,
        as much as a 135M model's recording takes on the GPU; sampled batches read the recording's logits
        (benchmarks/RESULTS.md, 2026-12-04, SmolLM2's batch-1 step)."""
        self.inputs.unpack_recorded(input_ids.shape[0])  # the step's packed inputs (their upload's kernel)
        hidden = self.forward_fn(input_ids, positions)
        if not self._samples_in_recording(runtime.descriptor):
            return hidden
        return hidden, self._greedy_tail(hidden, runtime.descriptor.num_tokens)

    def _greedy_tail(self, hidden: torch.Tensor, rows: int) -> torch.Tensor:
        """lm_head and the greedy pick over hidden's first rows, the ids in place (a recording's tail; its rows
        are the key's, padding included, so its kernels are chosen for them) -> the logits."""
        logits = self.model.compute_logits(hidden[:rows], float32=False)
        greedy(logits, out=self.sampled_ids[:rows], marked=self._marked_ids[:rows], workspace=self._argmax_workspace)
        return logits

    def _samples_in_recording(self, descriptor: BatchDescriptor | None) -> bool:
        # (a vocabulary split across ranks gathers its logits: those stay outside the recordings)
        return self._uniform_decode(descriptor) and self.model.shard.size == 1

    def forward(self, num_tokens: int, meta, mode: CUDAGraphMode = NONE,
                descriptor: BatchDescriptor | None = None, capturing: bool = False) -> torch.Tensor:
        """Forward over the first num_tokens rows of the static buffers -> hidden[num_tokens, H]."""
        ctx = ForwardContext(meta, self.kv_cache.layers, self.backend, self.scale)
        ids, pos = self.inputs.input_ids[:num_tokens], self.inputs.positions[:num_tokens]
        if self.inputs.lora_token_slots is not None:
            # a key without adapters runs (and records) no LoRA kernel; no key (prompt_logits): the slots decide
            set_adapters_active(descriptor is None or descriptor.has_lora)
        self.recorded_logits = None
        with forward_context(ctx), graph_runtime(mode, descriptor, capturing):
            if mode != FULL:
                return self.forward_fn(ids, pos)
            out = self.full_graph(ids, pos)
        if isinstance(out, tuple):  # the recording also wrote the greedy ids (_call_forward)
            out, self.recorded_logits = out
        return out

    @torch.inference_mode()
    def launch(self, batch: ScheduledBatch) -> InFlightStep:
        """Queue one step on the device (inputs, forward, sampling, copy of the ids to the host); no sync."""
        mode, padded = self.recorded_or_eager(*self.dispatcher.dispatch(batch.descriptor), batch.descriptor)
        num_padded = padded.num_tokens if mode != NONE else batch.num_tokens
        meta = self.inputs.prepare(batch, num_padded, unpack=mode != FULL)  # (a FULL recording unpacks them)
        self.inputs.gather_pending()
        # a FULL recording keeps the kernels it was recorded with: its key decides, not this batch
        meta.uniform_decode = self._uniform_decode(padded if mode == FULL else batch.descriptor)
        hidden = self.forward(num_padded, meta, mode, padded)
        num_reqs = len(batch.requests)
        self._sample(batch, hidden)
        self._host_turn ^= 1
        host_ids = self._host_ids[self._host_turn][:num_reqs]
        host_ids.copy_(self._marked_ids[:num_reqs], non_blocking=True)
        event = self._copied[self._host_turn]
        if event is not None:
            event.record()
        return InFlightStep(batch, host_ids, event, mode, num_padded)

    def _sample(self, batch: ScheduledBatch, hidden: torch.Tensor) -> None:
        """Each request's next id into sampled_ids (the next step's pending tokens) and _marked_ids."""
        num_reqs = len(batch.requests)
        greedy_only = all(r.sampling.temperature == 0 for r in batch.requests)
        logits = self.recorded_logits
        if logits is not None:  # the replayed recording ran lm_head and wrote the greedy ids
            if greedy_only:
                return
            logits = logits[:num_reqs].float()
        else:
            if self._uniform_decode(batch.descriptor):  # a token a request: its last row is its only one
                hidden_rows = hidden[:num_reqs]  # [R, H]
            else:
                hidden_rows = hidden[self.inputs.logits_indices[:num_reqs]]  # [R, H]: each request's last row
            logits = self.model.compute_logits(hidden_rows, float32=not greedy_only)
            if greedy_only:  # the argmax writes the ids in place
                greedy(logits, out=self.sampled_ids[:num_reqs], marked=self._marked_ids[:num_reqs])
                return
        self._temperatures[:num_reqs].copy_(torch.tensor([r.sampling.temperature for r in batch.requests]))
        self._top_ps[:num_reqs].copy_(torch.tensor([r.sampling.top_p for r in batch.requests]))
        tokens = sample(logits, self._temperatures[:num_reqs], self._top_ps[:num_reqs], self.generator, False)
        self.sampled_ids[:num_reqs].copy_(tokens)
        mark_nan_rows(logits, tokens, self._marked_ids[:num_reqs])

    @torch.inference_mode()
    def verify_step(self, batch: ScheduledBatch) -> tuple[list[list[int]], CUDAGraphMode, int]:
        """Speculative decoding: one step over every request's last token and drafts, then the drafts
        verified (runner/speculative/verify.py). Per request the tokens it gains, the mode, the tokens run."""
        from graphbench.runner.speculative.verify import verify

        mode, padded = self.recorded_or_eager(*self.dispatcher.dispatch(batch.descriptor), batch.descriptor)
        num_padded = padded.num_tokens if mode != NONE else batch.num_tokens
        meta = self.inputs.prepare(batch, num_padded, unpack=mode != FULL)  # (a FULL recording unpacks them)
        meta.uniform_decode = self._uniform_decode(padded if mode == FULL else batch.descriptor)
        hidden = self.forward(num_padded, meta, mode, padded)
        drafts = batch.draft_token_ids or [[] for _ in batch.requests]
        rows, start = [], 0  # each request's last row and the rows of its drafts
        for n, d in zip(batch.num_new_tokens, drafts):
            rows.extend(range(start + n - 1 - len(d), start + n))
            start += n
        temps = [r.sampling.temperature for r in batch.requests]
        greedy_only = all(t == 0 for t in temps)
        row_index = torch.tensor(rows, dtype=torch.int64).to(self.device, non_blocking=True)
        logits = self.model.compute_logits(hidden[row_index], float32=not greedy_only)  # [rows, V]
        tokens = verify(logits, drafts, temps, [r.sampling.top_p for r in batch.requests], self.generator)
        return tokens, mode, num_padded

    def _uniform_decode(self, descriptor: BatchDescriptor | None) -> bool:
        return descriptor is not None and descriptor.uniform and self.dispatcher.decode_query_len == 1

    @torch.inference_mode()
    def dummy_run(self, num_tokens: int, num_reqs: int, mode: CUDAGraphMode = NONE,
                  descriptor: BatchDescriptor | None = None, capturing: bool = False) -> torch.Tensor:
        """A forward over a dummy batch (warm-up, compilation, capture); descriptor: the key it stands for."""
        meta = self.inputs.prepare_dummy(num_tokens, num_reqs, self.kv_cache.num_blocks)
        meta.uniform_decode = self._uniform_decode(descriptor)
        return self.forward(num_tokens, meta, mode, descriptor, capturing)

    @torch.inference_mode()
    def record_forward(self, num_tokens: int, num_reqs: int, descriptor: BatchDescriptor, pool) -> torch.cuda.CUDAGraph:
        """A CUDA graph of the forward over a dummy batch, apart from the dispatcher's recordings (for
        timing: compile/variant_choice.py). The batch's inputs are filled before the recording."""
        self.dummy_run(num_tokens, num_reqs, NONE, descriptor)  # loads what the recording will launch
        meta = self.inputs.prepare_dummy(num_tokens, num_reqs, self.kv_cache.num_blocks)
        meta.uniform_decode = self._uniform_decode(descriptor)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):  # (synchronizes first: the inputs' upload is done)
            self.forward(num_tokens, meta, NONE, descriptor)
        return graph

    def _num_reqs(self, desc: BatchDescriptor) -> int:
        """The requests of a key's dummy batch."""
        return desc.num_reqs if desc.num_reqs is not None else min(desc.num_tokens, self.inputs.max_num_reqs)

    def capture(self, free_memory, startup_sizes: list[int] | None = None, cold: bool = False) -> CaptureReport:
        """Record the dispatcher's keys, largest first, in one pool (docs/MACHINERY.md §1.7); startup_sizes:
        only the keys of these token counts (capture on demand: the others when a step first needs one,
        record_on_demand). The eager warm-up runs a batch of every kind of kernels either way; cold (no
        compile-cache entry): every batch's kernels of graphbench's are compiled first, from threads."""
        every = self.dispatcher.capture_list()
        keys = self.dispatcher.capture_list(startup_sizes)
        report = CaptureReport(deferred=len(every) - len(keys))
        if not every:
            return report
        runtime.num_captured = {"FULL": 0, "PIECEWISE": 0}
        self._make_argmax_workspace([desc for mode, desc in every if mode == FULL])
        plan = [(mode, desc, self._num_reqs(desc)) for mode, desc in keys]
        started = time.perf_counter()
        # Eager warm-up first, one batch of each kind of kernels: kernels that load lazily (cuBLAS picks per
        # shape, Triton variants) load there or, for the other sizes, inside their recordings (relaxed
        # capture mode), so the free-memory delta below counts the code loaded on the way too (0.002 GiB for
        # -O2's 86 keys on the H200). Both loops launch graphbench's kernels with PDL (runner/kernels/pdl.py):
        # the warm-up loads those variants.
        with graph_launches_if_triton():
            batches: dict[tuple, BatchDescriptor] = {}  # each distinct batch's first key, in plan order
            for _mode, desc, num_reqs in [(m, d, self._num_reqs(d)) for m, d in every]:
                # has_lora apart: a key with adapters runs the LoRA kernels, which must load here too
                batches.setdefault((desc.num_tokens, num_reqs, self._uniform_decode(desc), desc.has_lora), desc)
            if cold:  # (their first launches compiled them one after another: the LoRA variants took 42 s)
                count = precompile(lambda: [self._warm_up(batch, desc) for batch, desc in batches.items()])
                report.precompiled = [count, time.perf_counter() - started]
                log.info("capture: %d kernel launches compiled ahead in %.1f s", *report.precompiled)
            for batch in warmup_batches(list(batches)):
                self._warm_up(batch, batches[batch])
            torch.cuda.synchronize(self.device)
            # the warm-ups' cached blocks go back first: the recordings' pool cannot reuse them, and the
            # allocator would free them the first time the pool finds the GPU full, inside the free-memory
            # delta below (a cold start once read -8.35 GB of graphs: benchmarks/RESULTS.md, 2026-12-06)
            torch.cuda.empty_cache()
            free_before = free_memory()
            reserved_before = torch.cuda.memory_reserved(self.device)
            # One pool per engine: a pool shared across engines dies with the first engine's graphs.
            # (Keys recorded on demand later go into the same pool.)
            self.graph_pool = torch.cuda.graph_pool_handle()
            with capture_session(self.graph_pool, self.capture_stream):
                free_last = free_before
                for mode, desc, num_reqs in plan:
                    key_started = time.perf_counter()
                    self.dummy_run(desc.num_tokens, num_reqs, mode, desc, capturing=True)
                    # the recording's memory is taken while capturing (pool blocks, instantiation), so
                    # the free-memory reading needs no sync; cudaMemGetInfo costs microseconds
                    free_now = free_memory()
                    report.per_key.append([mode.name, desc.num_tokens, time.perf_counter() - key_started,
                                           free_last - free_now])
                    free_last = free_now
        torch.cuda.synchronize(self.device)
        report.seconds = time.perf_counter() - started
        report.memory_bytes = free_before - free_memory()
        # the free-memory delta also counts the CUDA-graph objects themselves (about 2 MiB per FULL
        # recording on the H200); the allocator's reserved delta is the recordings' pool alone
        report.pool_bytes = torch.cuda.memory_reserved(self.device) - reserved_before
        report.num_graphs = dict(runtime.num_captured)
        if report.deferred:
            self.recorded = set(keys)
        return report

    def _warm_up(self, batch: tuple[int, int, bool, bool], desc: BatchDescriptor) -> None:
        """A dummy run of one batch (tokens, requests, ...) as its key's recording will launch it."""
        hidden = self.dummy_run(batch[0], batch[1], NONE, desc)
        if self._samples_in_recording(desc):  # the recorded tail's kernels, PDL variants
            self._greedy_tail(hidden, batch[0])

    def _make_argmax_workspace(self, full_keys: list[BatchDescriptor]) -> None:
        rows = max((d.num_tokens for d in full_keys if self._samples_in_recording(d)), default=0)
        if rows and triton_argmax_applies(self.device, self.model.arch.vocab_size):
            from graphbench.runner.kernels.argmax import argmax_workspace

            self._argmax_workspace = argmax_workspace(self.device, rows, self.model.arch.vocab_size)

    def take_capture_stall(self) -> float:
        """Seconds the steps since the last call waited for recordings made on demand (then zero again)."""
        seconds, self.capture_stall_seconds = self.capture_stall_seconds, 0.0
        return seconds

    def recorded_or_eager(self, mode: CUDAGraphMode, padded: BatchDescriptor,
                          batch: BatchDescriptor) -> tuple[CUDAGraphMode, BatchDescriptor]:
        """The dispatched key, recorded now if start-up left it for later (capture on demand: the step waits
        for it, self.capture_stall_seconds), or eager where deferred keys are never recorded."""
        if mode == NONE or self.recorded is None or (mode, padded) in self.recorded:
            return mode, padded
        if not self.record_deferred:
            return NONE, batch
        started = time.perf_counter()
        torch.cuda.synchronize(self.device)  # the step in flight has read the static inputs the dummy batch overwrites
        frozen = gc.get_freeze_count() > 0  # (a benchmark froze the engine out of the collector: keep it so)
        with graph_launches_if_triton(), capture_session(self.graph_pool, self.capture_stream):
            self.dummy_run(padded.num_tokens, self._num_reqs(padded), mode, padded, capturing=True)
        if frozen:
            gc.freeze()
        torch.cuda.synchronize(self.device)
        self.recorded.add((mode, padded))
        seconds = time.perf_counter() - started
        self.capture_stall_seconds += seconds
        self.deferred_log.append([mode.name, padded.num_tokens, seconds])
        return mode, padded
