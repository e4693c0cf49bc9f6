"""Static step buffers: the flat batch and attention metadata at fixed device addresses.

Host-side values are staged in (pinned, on CUDA) CPU mirrors and copied into the first rows
of the device buffers; rows past the real batch hold harmless padding (position 0, slot -1).
"""

from __future__ import annotations

import numpy as np
import torch

from graphbench.runner.attention.backend import AttentionMetadata
from graphbench.runner.scheduler import ScheduledBatch


class StepInputs:
    def __init__(self, max_num_tokens: int, max_num_reqs: int, max_blocks_per_seq: int, block_size: int,
                 device: torch.device):
        self.max_num_tokens, self.max_num_reqs, self.block_size = max_num_tokens, max_num_reqs, block_size
        self.device = device
        pin = device.type == "cuda"

        def pair(shape, dtype, fill=0):
            dev = torch.full(shape, fill, dtype=dtype, device=device)
            host = torch.full(shape, fill, dtype=dtype, pin_memory=pin)
            return dev, host, host.numpy()

        self.input_ids, self._ids_cpu, self._ids_np = pair((max_num_tokens,), torch.int64)
        self.positions, self._pos_cpu, self._pos_np = pair((max_num_tokens,), torch.int64)
        self.slot_mapping, self._slot_cpu, self._slot_np = pair((max_num_tokens,), torch.int64, -1)
        self.query_start_loc, self._qsl_cpu, self._qsl_np = pair((max_num_reqs + 1,), torch.int32)
        self.seq_lens, self._lens_cpu, self._lens_np = pair((max_num_reqs,), torch.int32)
        self.logits_indices, self._li_cpu, self._li_np = pair((max_num_reqs,), torch.int64)
        self.block_tables, self._bt_cpu, self._bt_np = pair((max_num_reqs, max_blocks_per_seq), torch.int32)
        self.num_tokens = 0
        self.num_reqs = 0

    def prepare_dummy(self, num_tokens: int, num_reqs: int, num_kv_blocks: int) -> AttentionMetadata:
        """A batch for warm-up and capture: num_reqs requests sharing num_tokens, writing no KV (slot -1)."""
        per_req = [num_tokens // num_reqs + (1 if r < num_tokens % num_reqs else 0) for r in range(num_reqs)]
        starts = self._qsl_np
        starts[0] = 0
        starts[1:num_reqs + 1] = np.cumsum(per_req)
        starts[num_reqs + 1:] = num_tokens
        self._lens_np[:num_reqs] = per_req
        self._lens_np[num_reqs:] = 0
        max_blocks = -(-max(per_req) // self.block_size)
        self._bt_np[:num_reqs, :max_blocks] = np.arange(max_blocks) % num_kv_blocks
        self._ids_np[:num_tokens] = 0
        self._pos_np[:num_tokens] = np.concatenate([np.arange(n) for n in per_req])
        self._slot_np[:num_tokens] = -1
        self._li_np[:num_reqs] = starts[1:num_reqs + 1] - 1
        return self._upload(num_tokens, num_tokens, num_reqs, max_blocks)

    def prepare(self, batch: ScheduledBatch, num_padded_tokens: int | None = None) -> AttentionMetadata:
        """Fill the buffers for this batch; rows [T, num_padded_tokens) get padding values."""
        num_tokens, num_reqs = batch.num_tokens, len(batch.requests)
        padded = num_padded_tokens or num_tokens
        ids, pos, slots = self._ids_np, self._pos_np, self._slot_np
        starts, lens, bt = self._qsl_np, self._lens_np, self._bt_np
        max_blocks_used = 1
        t = 0
        starts[0] = 0
        for r, (req, num_new) in enumerate(zip(batch.requests, batch.num_new_tokens)):
            first = req.num_computed_tokens
            tokens = req.all_token_ids
            ids[t:t + num_new] = tokens[first:first + num_new]
            positions = np.arange(first, first + num_new)
            pos[t:t + num_new] = positions
            blocks = np.asarray(req.block_ids, dtype=np.int64)
            slots[t:t + num_new] = blocks[positions // self.block_size] * self.block_size + positions % self.block_size
            bt[r, :len(blocks)] = blocks
            max_blocks_used = max(max_blocks_used, len(blocks))
            t += num_new
            starts[r + 1] = t
            lens[r] = first + num_new
        starts[num_reqs + 1:] = num_tokens
        lens[num_reqs:] = 0
        pos[num_tokens:padded] = 0
        slots[num_tokens:padded] = -1
        ids[num_tokens:padded] = 0
        self._li_np[:num_reqs] = starts[1:num_reqs + 1] - 1
        return self._upload(num_tokens, padded, num_reqs, max_blocks_used)

    def _upload(self, num_tokens: int, padded: int, num_reqs: int, max_blocks_used: int) -> AttentionMetadata:
        starts, lens = self._qsl_np, self._lens_np
        nb = True
        self.input_ids[:padded].copy_(self._ids_cpu[:padded], non_blocking=nb)
        self.positions[:padded].copy_(self._pos_cpu[:padded], non_blocking=nb)
        self.slot_mapping[:padded].copy_(self._slot_cpu[:padded], non_blocking=nb)
        self.query_start_loc.copy_(self._qsl_cpu, non_blocking=nb)
        self.seq_lens.copy_(self._lens_cpu, non_blocking=nb)
        self.logits_indices[:num_reqs].copy_(self._li_cpu[:num_reqs], non_blocking=nb)
        self.block_tables[:num_reqs, :max_blocks_used].copy_(self._bt_cpu[:num_reqs, :max_blocks_used], non_blocking=nb)
        self.num_tokens, self.num_reqs = num_tokens, num_reqs
        return AttentionMetadata(
            slot_mapping=self.slot_mapping[:padded],
            query_start_loc=self.query_start_loc,
            seq_lens=self.seq_lens,
            block_tables=self.block_tables,
            num_reqs=num_reqs,
            num_tokens=num_tokens,
            query_start_loc_host=starts[: num_reqs + 1].tolist(),
            seq_lens_host=lens[:num_reqs].tolist(),
        )
