"""Static step buffers: the flat batch and attention metadata at fixed device addresses.

Host-side values are staged in (pinned, on CUDA) CPU mirrors and copied into the first rows
of the device buffers; rows past the real batch hold harmless padding (position 0, slot -1).
There are two sets of host mirrors, used in turn: with asynchronous scheduling the host fills
step N+1's while step N's copies may still be queued on the GPU.

A token sampled by the previous step may not be on the host yet (asynchronous scheduling): its
request's output ends with PENDING_TOKEN, and prepare() records a gather that fills that input row
on the device from the previous step's sampled ids.

On the GPU the buffers a step changes travel as one packet: one copy and one kernel
(runner/kernels/step_inputs.py), which also reads the pending tokens, instead of a copy per buffer and
two kernels for the gather (the CPU's path).
"""

from __future__ import annotations

import numpy as np
import torch

from graphbench.runner.attention.backend import AttentionMetadata
from graphbench.runner.kernels.util import PACKET_HEADER, triton_interpreting
from graphbench.runner.scheduler import ScheduledBatch


class _HostStaging:
    """One set of host mirrors: (pinned) CPU tensors and numpy views of them."""

    def __init__(self, shapes: dict[str, tuple[tuple[int, ...], torch.dtype, int]], pin: bool, packet_size: int):
        self.tensors = {name: torch.full(shape, fill, dtype=dtype, pin_memory=pin)
                        for name, (shape, dtype, fill) in shapes.items()}
        self.arrays = {name: t.numpy() for name, t in self.tensors.items()}
        self.packet = torch.zeros(packet_size, dtype=torch.int32, pin_memory=pin)  # the packed upload
        self.packet_array = self.packet.numpy()


class StepInputs:
    def __init__(self, max_num_tokens: int, max_num_reqs: int, max_blocks_per_seq: int, block_size: int,
                 device: torch.device):
        self.max_num_tokens, self.max_num_reqs, self.block_size = max_num_tokens, max_num_reqs, block_size
        self.device = device
        shapes = {
            "input_ids": ((max_num_tokens,), torch.int64, 0),
            "positions": ((max_num_tokens,), torch.int64, 0),
            "slot_mapping": ((max_num_tokens,), torch.int64, -1),
            "query_start_loc": ((max_num_reqs + 1,), torch.int32, 0),
            "seq_lens": ((max_num_reqs,), torch.int32, 0),
            "logits_indices": ((max_num_reqs,), torch.int64, 0),
            "block_tables": ((max_num_reqs, max_blocks_per_seq), torch.int32, 0),
            "gather_rows": ((2, max_num_reqs), torch.int64, 0),  # [input row, previous sampled row]
            "lora_slots": ((max_num_tokens,), torch.int32, -1),  # each token's adapter row (slot - 1; -1: none)
        }
        for name, (shape, dtype, fill) in shapes.items():
            setattr(self, name, torch.full(shape, fill, dtype=dtype, device=device))
        # the last step's sampled ids (its sampling writes them); a pending input token is read from here
        self.sampled_ids = torch.zeros(max_num_reqs, dtype=torch.int64, device=device)
        pin = device.type == "cuda"
        self.packed = pin or triton_interpreting()
        self.max_blocks_per_seq = max_blocks_per_seq
        # (kernels/step_inputs.py's header and sections at their largest)
        packet_size = PACKET_HEADER + self.max_packet_values(max_num_tokens) if self.packed else 0
        self.packet = torch.zeros(packet_size, dtype=torch.int32, device=device)
        if self.packed:  # (imported here, not in a step: the kernel module needs Triton)
            from graphbench.runner.kernels.step_inputs import unpack_step_inputs

            self._unpack = unpack_step_inputs
        self._stages = [_HostStaging(shapes, pin, packet_size), _HostStaging(shapes, pin, packet_size)]
        self._uploaded: list = [None, None]  # per set: an event after its last copies were queued (CUDA)
        self._turn = 0
        # per set, per block-table row: (the request's block_ids list, how many of its blocks the row holds)
        self._block_rows: list[list] = [[None] * max_num_reqs, [None] * max_num_reqs]
        self._counting = np.arange(max_num_reqs + 1)  # 0, 1, ..., max_num_reqs
        self.num_tokens = 0
        self.num_reqs = 0
        self.num_gathers = 0  # input rows to fill from the previous step's sampled ids
        self.lora_token_slots: torch.Tensor | None = None  # the model's buffer, when adapters are loaded

    def max_packet_values(self, padded: int) -> int:
        """The most values a packet of `padded` tokens holds (its sections at their largest, kernels/step_inputs.py;
        the adapters' rows counted whether loaded or not)."""
        reqs = min(padded, self.max_num_reqs)
        return 4 * padded + 2 * self.max_num_reqs + 1 + reqs * (1 + self.max_blocks_per_seq)

    def unpack_recorded(self, padded: int) -> None:
        """The packed upload's kernel for a FULL recording of `padded` tokens: it reads the counts from the
        packet, so the recording's launch serves every step at its key (whose prepare left the kernel out)."""
        if self.packed:
            self._launch_unpack(padded, self.max_packet_values(padded))

    def _launch_unpack(self, padded: int, max_values: int) -> None:
        self._unpack(self.packet, self.sampled_ids, self.input_ids, self.positions, self.slot_mapping,
                     self.logits_indices, self.query_start_loc, self.seq_lens, self.block_tables,
                     self.lora_token_slots, padded, max_values)

    def _next_stage(self) -> dict[str, np.ndarray]:
        """The other set of host mirrors, once the device has read it: overwriting pinned memory that a
        queued copy has not read yet would hand the device a torn batch (callers that do not wait for
        steps, e.g. a loop of forwards, would otherwise race)."""
        self._turn ^= 1
        event = self._uploaded[self._turn]
        if event is not None:
            event.synchronize()  # in the engine: long done (the step before last has finished)
        return self._stages[self._turn].arrays

    def prepare_dummy(self, num_tokens: int, num_reqs: int, num_kv_blocks: int) -> AttentionMetadata:
        """A batch for warm-up and capture: num_reqs requests sharing num_tokens, writing no KV (slot -1)."""
        a = self._next_stage()
        per_req = [num_tokens // num_reqs + (1 if r < num_tokens % num_reqs else 0) for r in range(num_reqs)]
        starts = a["query_start_loc"]
        starts[0] = 0
        starts[1:num_reqs + 1] = np.cumsum(per_req)
        starts[num_reqs + 1:] = num_tokens
        a["seq_lens"][:num_reqs] = per_req
        a["seq_lens"][num_reqs:] = 0
        max_blocks = -(-max(per_req) // self.block_size)
        if max_blocks > a["block_tables"].shape[1]:
            raise ValueError(f"dummy batch: {max(per_req)} tokens in one request exceed max_model_len "
                             f"({a['block_tables'].shape[1] * self.block_size}); use more requests")
        a["block_tables"][:num_reqs, :max_blocks] = np.arange(max_blocks) % num_kv_blocks
        self._block_rows[self._turn] = [None] * self.max_num_reqs
        a["input_ids"][:num_tokens] = 0
        a["positions"][:num_tokens] = np.concatenate([np.arange(n) for n in per_req])
        a["slot_mapping"][:num_tokens] = -1
        a["logits_indices"][:num_reqs] = starts[1:num_reqs + 1] - 1
        a["lora_slots"][:num_tokens] = -1
        self.num_gathers = 0
        return self._upload(num_tokens, num_tokens, num_reqs, max_blocks)

    def prepare(self, batch: ScheduledBatch, num_padded_tokens: int | None = None,
                unpack: bool = True) -> AttentionMetadata:
        """Fill the buffers for this batch; rows [T, num_padded_tokens) get padding values. unpack=False: the
        packed upload's copy only, its kernel left to the FULL recording that replays next (unpack_recorded)."""
        a = self._next_stage()
        num_tokens, num_reqs = batch.num_tokens, len(batch.requests)
        padded = num_padded_tokens or num_tokens
        ids, pos, slots = a["input_ids"], a["positions"], a["slot_mapping"]
        bt, gathers = a["block_tables"], a["gather_rows"]
        written = self._block_rows[self._turn]
        block_size = self.block_size
        # The host loop runs every step for every request (~0.1 ms at 64): decode rows (one token
        # each, scheduled first) go into lists written at once, not one numpy scalar at a time.
        decode_ids, decode_slots, firsts = [], [], []  # (a decode row's position is its `first`)
        gather_dst, gather_src = [], []
        max_blocks_used, t = 1, 0
        drafted = batch.draft_token_ids
        for r, (req, num_new) in enumerate(zip(batch.requests, batch.num_new_tokens)):
            first = req.num_computed_tokens
            blocks = req.block_ids
            num_blocks = len(blocks)
            firsts.append(first)
            num_prompt = len(req.prompt_token_ids)
            outputs = req.output_token_ids
            if num_new == 1 and t == len(decode_ids):  # decode (the common case)
                decode_ids.append(req.prompt_token_ids[first] if first < num_prompt else outputs[first - num_prompt])
                decode_slots.append(blocks[first // block_size] * block_size + first % block_size)
            else:
                tokens = req.all_token_ids + drafted[r] if drafted is not None and drafted[r] else req.all_token_ids
                ids[t:t + num_new] = tokens[first:first + num_new]
                positions = np.arange(first, first + num_new)
                pos[t:t + num_new] = positions
                slots[t:t + num_new] = np.asarray(blocks)[positions // block_size] * block_size + positions % block_size
            if req.pending_row is not None:
                last = num_prompt + len(outputs) - 1
                if first <= last < first + num_new:  # filled on the device from the previous step's sample
                    gather_dst.append(t + last - first)
                    gather_src.append(req.pending_row)
            # block_ids only grow in place or are replaced by a new list (preemption, finish): a row
            # still holding the same list needs only its new blocks written
            done = written[r]
            if done is not None and done[0] is blocks:
                if done[1] != num_blocks:
                    bt[r, done[1]:num_blocks] = blocks[done[1]:]
                    written[r] = (blocks, num_blocks)
            else:
                bt[r, :num_blocks] = blocks
                written[r] = (blocks, num_blocks)
            if num_blocks > max_blocks_used:
                max_blocks_used = num_blocks
            t += num_new
        num_decode = len(decode_ids)
        if num_decode:
            ids[:num_decode] = decode_ids
            pos[:num_decode] = firsts[:num_decode]
            slots[:num_decode] = decode_slots
        if gather_dst:
            ids[gather_dst] = 0
        num_gathers = len(gather_dst)
        if num_gathers:
            gathers[0, :num_gathers] = gather_dst
            gathers[1, :num_gathers] = gather_src
        starts, lens = a["query_start_loc"], a["seq_lens"]
        lens[:num_reqs] = firsts
        if num_decode == num_reqs == num_tokens:  # a token a request (decode): offsets 0..R, last rows 0..R-1
            starts[:num_reqs + 1] = self._counting[:num_reqs + 1]
            lens[:num_reqs] += 1
            a["logits_indices"][:num_reqs] = self._counting[:num_reqs]
        else:
            starts[0] = 0
            np.cumsum(batch.num_new_tokens, out=starts[1:num_reqs + 1])
            lens[:num_reqs] += starts[1:num_reqs + 1] - starts[:num_reqs]
            a["logits_indices"][:num_reqs] = starts[1:num_reqs + 1] - 1
        starts[num_reqs + 1:] = num_tokens
        lens[num_reqs:] = 0
        pos[num_tokens:padded] = 0
        slots[num_tokens:padded] = -1
        ids[num_tokens:padded] = 0
        if self.lora_token_slots is not None:
            a["lora_slots"][:num_tokens] = np.repeat([r.lora_slot - 1 for r in batch.requests], batch.num_new_tokens)
            a["lora_slots"][num_tokens:padded] = -1
        self.num_gathers = num_gathers
        return self._upload(num_tokens, padded, num_reqs, max_blocks_used, unpack)

    def gather_pending(self) -> None:
        """input_ids[row] = sampled_ids[previous row] for every pending token of this step (on the device;
        done by the packed upload's kernel already)."""
        n = self.num_gathers
        if n and not self.packed:
            rows = self.gather_rows[:, :n]
            self.input_ids.index_copy_(0, rows[0], self.sampled_ids.index_select(0, rows[1]))

    def _upload(self, num_tokens: int, padded: int, num_reqs: int, max_blocks_used: int,
                unpack: bool = True) -> AttentionMetadata:
        if self.packed:
            self._upload_packed(padded, num_reqs, max_blocks_used, unpack)
        else:
            self._upload_each(padded, num_reqs, max_blocks_used)
        if self.device.type == "cuda":
            event = self._uploaded[self._turn] or torch.cuda.Event()
            event.record()
            self._uploaded[self._turn] = event
        self.num_tokens, self.num_reqs = num_tokens, num_reqs
        a = self._stages[self._turn].arrays
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[:padded],
            query_start_loc=self.query_start_loc,
            seq_lens=self.seq_lens,
            block_tables=self.block_tables,
            num_reqs=num_reqs,
            num_tokens=num_tokens,
            query_start_loc_host=a["query_start_loc"][: num_reqs + 1].tolist(),
            seq_lens_host=a["seq_lens"][:num_reqs].tolist(),
        )

    def _upload_packed(self, padded: int, num_reqs: int, max_blocks_used: int, unpack: bool) -> None:
        """The host mirrors' used rows as one packet (kernels/step_inputs.py's layout): one copy, one launch
        (unpack=False: none, the FULL recording replaying next unpacks it)."""
        stage = self._stages[self._turn]
        a, packet = stage.arrays, stage.packet_array[PACKET_HEADER:]
        p, r, r_max = padded, num_reqs, self.max_num_reqs
        packet[:p] = a["input_ids"][:p]
        n = self.num_gathers
        if n:  # a pending token is -1 - its row in sampled_ids
            packet[a["gather_rows"][0, :n]] = -1 - a["gather_rows"][1, :n]
        packet[p:2 * p] = a["positions"][:p]
        packet[2 * p:3 * p] = a["slot_mapping"][:p]
        at = 3 * p
        for name, count in (("logits_indices", r), ("query_start_loc", r_max + 1), ("seq_lens", r_max)):
            packet[at:at + count] = a[name][:count]
            at += count
        packet[at:at + r * max_blocks_used].reshape(r, max_blocks_used)[:] = a["block_tables"][:r, :max_blocks_used]
        at += r * max_blocks_used
        if self.lora_token_slots is not None:
            packet[at:at + p] = a["lora_slots"][:p]
            at += p
        stage.packet_array[:3] = (r, max_blocks_used, at)
        self.packet[:PACKET_HEADER + at].copy_(stage.packet[:PACKET_HEADER + at], non_blocking=True)
        if unpack:
            self._launch_unpack(p, at)

    def _upload_each(self, padded: int, num_reqs: int, max_blocks_used: int) -> None:
        """A copy per buffer (the CPU's path)."""
        host = self._stages[self._turn].tensors
        for name, rows in (("input_ids", padded), ("positions", padded), ("slot_mapping", padded),
                           ("query_start_loc", None), ("seq_lens", None), ("logits_indices", num_reqs)):
            dst, src = getattr(self, name), host[name]
            (dst if rows is None else dst[:rows]).copy_(src if rows is None else src[:rows], non_blocking=True)
        self.block_tables[:num_reqs, :max_blocks_used].copy_(
            host["block_tables"][:num_reqs, :max_blocks_used], non_blocking=True)
        if self.num_gathers:
            self.gather_rows[:, :self.num_gathers].copy_(host["gather_rows"][:, :self.num_gathers], non_blocking=True)
        if self.lora_token_slots is not None:
            self.lora_token_slots[:padded].copy_(host["lora_slots"][:padded], non_blocking=True)
        if self.packet.numel():  # a packed engine switched to copies (a test): recordings' unpacks find no values
            self.packet[2] = 0
