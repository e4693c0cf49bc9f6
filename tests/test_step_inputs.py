"""StepInputs.prepare: block-table rows are rewritten only where a row's blocks changed, and exactly."""

import torch

from graphbench.runner.inputs import StepInputs
from graphbench.runner.request import Request, SamplingParams
from graphbench.runner.scheduler import BatchDescriptor, ScheduledBatch


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
