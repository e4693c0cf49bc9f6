"""StepInputs.prepare: block-table rows are rewritten only where a row's blocks changed, and exactly."""

import torch

from graphbench.runner.inputs import StepInputs
from graphbench.runner.request import Request, SamplingParams
from graphbench.runner.scheduler import BatchDescriptor, ScheduledBatch
from tests.interpreted import run_interpreted


def _request(request_id: int, num_prompt: int, blocks: list[int]) -> Request:
    req = Request(request_id, list(range(100, 100 + num_prompt)), SamplingParams(max_tokens=50))
    req.block_ids = blocks
    req.num_computed_tokens = num_prompt - 1  # its last prompt token is this step's one new token
    return req


def _decode(inputs: StepInputs, *requests: Request) -> list[list[int]]:
    batch = ScheduledBatch(list(requests), [1] * len(requests), BatchDescriptor(len(requests), len(requests), True))
    inputs.prepare(batch)
    return [inputs.block_tables[r, :len(req.block_ids)].tolist() for r, req in enumerate(requests)]


def test_block_rows_follow_growth_replacement_and_new_owners():
    inputs = StepInputs(max_num_tokens=8, max_num_reqs=4, max_blocks_per_seq=6, block_size=4,
                        device=torch.device("cpu"))
    a, b = _request(1, 6, [7, 3]), _request(2, 3, [9])
    # both host staging sets see each state (they alternate step by step)
    for _ in range(2):
        assert _decode(inputs, a, b) == [[7, 3], [9]]
    a.block_ids.extend([11, 2])  # grown in place: only the tail is new
    a.output_token_ids, a.num_computed_tokens = list(range(7)), 12  # 13 tokens, the 13th is new
    for _ in range(2):
        assert _decode(inputs, a, b) == [[7, 3, 11, 2], [9]]
    a.block_ids = [5, 6, 8, 4]  # replaced (preempted and recomputed): same length, other blocks
    for _ in range(2):
        assert _decode(inputs, a, b) == [[5, 6, 8, 4], [9]]
    c = _request(3, 2, [1])  # another request in row 0
    for _ in range(2):
        assert _decode(inputs, c, a) == [[1], [5, 6, 8, 4]]
    inputs.prepare_dummy(4, 2, num_kv_blocks=16)  # a dummy batch overwrites rows: written again after it
    for _ in range(2):
        assert _decode(inputs, a, b) == [[5, 6, 8, 4], [9]]


def test_decode_rows_ids_positions_slots_and_lengths():
    inputs = StepInputs(max_num_tokens=8, max_num_reqs=4, max_blocks_per_seq=6, block_size=4,
                        device=torch.device("cpu"))
    a, b = _request(1, 6, [7, 3]), _request(2, 3, [9])
    b.output_token_ids = [555]
    b.num_computed_tokens = 3  # its new token is the sampled 555, at position 3
    _decode(inputs, a, b)
    assert inputs.input_ids[:2].tolist() == [105, 555]
    assert inputs.positions[:2].tolist() == [5, 3]
    assert inputs.slot_mapping[:2].tolist() == [3 * 4 + 1, 9 * 4 + 3]
    assert inputs.seq_lens[:3].tolist() == [6, 4, 0]
    assert inputs.query_start_loc.tolist() == [0, 1, 2, 2, 2]
    assert inputs.logits_indices[:2].tolist() == [0, 1]
    # a prefill chunk after a decode row: offsets and last rows from the counts
    c = _request(3, 9, [4, 5, 6])
    c.num_computed_tokens = 2
    inputs.prepare(ScheduledBatch([a, c], [1, 5], BatchDescriptor(6, None, False)))
    assert inputs.query_start_loc.tolist() == [0, 1, 6, 6, 6] and inputs.logits_indices[:2].tolist() == [0, 5]
    assert inputs.seq_lens[:3].tolist() == [6, 7, 0] and inputs.positions[:6].tolist() == [5, 2, 3, 4, 5, 6]


def test_the_packed_upload_fills_every_buffer_as_the_copies_do():
    """kernels/step_inputs.py (the GPU's path) in the interpreter against a copy per buffer: decode rows, a
    pending token read from the previous step's samples, a prefill chunk, padding rows, adapters' rows,
    a dummy batch, and block rows that grow; each host staging set twice. Also launched as a FULL recording
    launches it (its counts read from the packet, programs for the most values 12 tokens may need)."""
    run_interpreted('''
import torch
from graphbench.runner.inputs import StepInputs
from graphbench.runner.request import PENDING_TOKEN, Request, SamplingParams
from graphbench.runner.scheduler import BatchDescriptor, ScheduledBatch

def make():
    inputs = StepInputs(max_num_tokens=16, max_num_reqs=4, max_blocks_per_seq=6, block_size=4, device=torch.device("cpu"))
    inputs.lora_token_slots = torch.full((16,), -7, dtype=torch.int32)
    inputs.sampled_ids.copy_(torch.tensor([11, 22, 33, 44]))
    return inputs

packed, plain, recorded = make(), make(), make()  # recorded: its kernel launched as a FULL recording does
assert packed.packed and plain.packed
plain.packed = False
def request(i, prompt, blocks, computed, lora_slot=0):
    r = Request(i, list(range(100 + 10 * i, 100 + 10 * i + prompt)), SamplingParams(max_tokens=50), lora_slot=lora_slot)
    r.block_ids, r.num_computed_tokens = blocks, computed
    return r
a = request(1, 6, [7, 3], 5, lora_slot=2)
b = request(2, 3, [9], 3)
b.output_token_ids, b.pending_row = [PENDING_TOKEN], 2  # its token is sampled_ids[2] (33)
c = request(3, 9, [4, 5, 6], 2, lora_slot=1)  # a prefill chunk of 5 tokens
names = ["input_ids", "positions", "slot_mapping", "query_start_loc", "seq_lens", "logits_indices", "block_tables",
         "lora_token_slots"]
def same(rows):
    for name in names:
        for other in (packed, recorded):
            x, y = getattr(other, name), getattr(plain, name)
            x, y = (x[:rows], y[:rows]) if x.shape[0] == 16 else (x, y)
            assert torch.equal(x, y), (name, x, y)
for step in range(4):
    batch = ScheduledBatch([a, b, c], [1, 1, 5], BatchDescriptor(7, None, False))
    for inputs in (packed, plain):
        meta = inputs.prepare(batch, 12)
        inputs.gather_pending()
        assert meta.query_start_loc_host == [0, 1, 2, 7]
    recorded.prepare(batch, 12, unpack=False)  # the copy alone: the recording's launch reads the counts from it
    if step == 0:
        assert not torch.equal(recorded.input_ids[:12], plain.input_ids[:12])  # (nothing unpacked yet)
    recorded.unpack_recorded(12)
    same(12)
    assert packed.input_ids[1].item() == 33 and packed.lora_token_slots[7:12].tolist() == [-1] * 5
    if step == 1:
        a.block_ids.append(8)
        a.num_computed_tokens = 8
        a.output_token_ids = [1, 2, 3]
for inputs in (packed, plain, recorded):
    inputs.prepare_dummy(8, 3, num_kv_blocks=16)
same(8)
recorded.packed = False  # switched to a copy per buffer: a recording's unpack then writes nothing
for inputs in (recorded, plain):
    inputs.prepare(batch, 12)
    inputs.gather_pending()
recorded._unpack(recorded.packet, recorded.sampled_ids, recorded.input_ids, recorded.positions,
                 recorded.slot_mapping, recorded.logits_indices, recorded.query_start_loc, recorded.seq_lens,
                 recorded.block_tables, recorded.lora_token_slots, 12, recorded.max_packet_values(12))
packed = recorded  # (same() compares it too)
same(12)
print("ok")
''')
