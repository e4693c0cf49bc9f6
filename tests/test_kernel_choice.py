"""runner/kernel_choice.py and kernel_timing.py without a GPU: the candidates start-up times, the search
over them, the rules, what the projections run once a choice is installed, and the choices kept in the
compile-cache entry (loaded on a warm start, measured again when they do not fit) and in the GPU's shared
store (loaded by another config's cold start)."""

from __future__ import annotations

import json

import pytest
import torch

from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernel_choice import KernelChoice


@pytest.fixture(autouse=True)
def _no_installed_choices():
    kc.forget_all()
    yield
    kc.forget_all()


def test_candidates_fit_their_shape():
    # SmolLM2's K = 576 = 9 x 64: 64-wide K tiles and the whole row in one masked tile of 1024; 1 to 64 rows
    # a program at 256..16384 values, the warps nearest 32 values a thread; and the rule's blocks
    assert kc.gemv_candidates(960, 576) == [(4, 64, 2), (8, 64, 2), (16, 64, 2), (32, 64, 2), (64, 64, 4), (1, 1024, 2),
                                            (2, 1024, 2), (4, 1024, 4), (8, 1024, 8), (16, 1024, 8), (4, 64, 8)]
    assert kc.blocks_fit("gemv", (4, 1024, 4), 960, 576, 1) and not kc.blocks_fit("gemv", (4, 2048, 4), 960, 576, 1)
    assert not kc.blocks_fit("gemv", (4, 128, 4), 960, 576, 1)  # neither divides nor covers K
    assert not kc.blocks_fit("skinny", (32, 1024, 1, 4, 4), 960, 576, 16)  # the GEMMs do not mask along K
    # llama-3.2-1b's K = 2048: the two largest tiles, then the rule's blocks where the grid lacks them
    got = kc.gemv_candidates(3072, 2048)
    assert got[:4] == [(1, 2048, 2), (2, 2048, 4), (4, 2048, 8), (8, 2048, 8)] and (4, 1024, 8) in got
    assert all(2048 % bk == 0 and 256 <= bn * bk <= 16384 for bn, bk, _ in got)
    assert kc.gated_gemv_candidates(3072, 2048)[0] == (1, 1024, 2)  # half the GEMV's columns a program
    assert kc.gemv_neighbours((2, 2048, 4)) == [(2, 2048, 2), (2, 2048, 8)]
    assert kc.gemv_neighbours((1, 64, 2)) == []  # 1 value a thread at 2 warps already: none
    assert kc.gemv_neighbours((2, 2048, 4), k=2048) == [(2, 2048, 2), (2, 2048, 8)]  # one K tile: no stages
    assert kc.gemv_neighbours((4, 256, 4), k=4864) == [(4, 256, 2), (4, 256, 4, 2), (4, 256, 4, 3)]  # 8 warps: 4 values
    assert kc.gemv_neighbours((4, 256, 4, 3), k=4864) == [(4, 256, 2, 3)]  # a stages winner's: its stages kept
    assert kc.blocks_fit("gemv", (4, 256, 4, 3), 896, 4864, 1) and not kc.blocks_fit("norm_gemv", (4, 256, 4, 3), 896, 4864, 1)
    # 9 tiles of 64 split 3 ways (not a power of two), 15 or fewer column blocks
    assert kc.skinny_candidates(960, 576, 132) == [(32, 64, 3, 4, 4), (64, 64, 3, 4, 4), (128, 64, 3, 4, 4)]
    assert kc.skinny_candidates(2048, 2048, 132)[1] == (32, 128, 4, 4, 4)
    assert kc.skinny_neighbours((64, 64, 3, 4, 4), 576) == [(64, 64, 1, 4, 4), (64, 64, 3, 4, 3), (64, 64, 3, 4, 5)]
    assert kc.gated_skinny_candidates(576) == [(16, 64, 4, 4), (32, 64, 4, 4), (64, 64, 4, 4)]
    for n, k in ((960, 576), (3072, 2048), (2048, 8192), (49152, 576)):
        for b in kc.gemv_candidates(n, k):
            assert kc.blocks_fit("gemv", b, n, k, 1), (n, k, b)
        for rows in (16, 32, 64):
            for b in kc.skinny_candidates(n, k, 132):
                assert kc.blocks_fit("skinny", b, n, k, rows), (n, k, b)


# odd shapes of checkpoints nobody measured: hidden sizes 200, 960, 1000, 2560, 3584; intermediate sizes 1000,
# 4864, 5632, 8960, 18944; qkv widths of odd head counts; vocabularies 32001, 49152, 151936; N below any BLOCK_N
ODD_N = (1, 3, 7, 17, 100, 200, 280, 960, 1000, 2560, 3584, 4608, 4864, 9728, 11264, 37888, 32001, 151936)
ODD_K = (2, 30, 48, 96, 192, 200, 576, 896, 960, 1000, 1120, 2560, 3584, 4864, 5632, 8960, 14336, 18944)


def test_every_block_proposed_for_an_odd_shape_fits_it():
    # what start-up times (kernel_timing._searches: the GEMVs at one row, the skinny GEMMs at 16..64 rows; the
    # fold's coarse GEMV blocks and their neighbours) and what the rules run must all run on the shape
    for n in ODD_N:
        for k in ODD_K:
            for b in kc.gemv_candidates(n, k):
                assert b[1] >= 64 or b[1] == kc.next_power_of_2(k), (n, k, b)  # no rule tile of 2 or 8 (K 30, 200)
                assert kc.blocks_fit("gemv", b, n, k, 1) and kc.blocks_fit("norm_gemv", b, n, k, 1), (n, k, b)
                assert all(kc.blocks_fit("gemv", nb, n, k, 1) for nb in kc.gemv_neighbours(b, k)), (n, k, b)
                assert all(kc.blocks_fit("norm_gemv", nb, n, k, 1) for nb in kc.gemv_neighbours(b)), (n, k, b)
            for b in kc.gated_gemv_candidates(2 * n, k):
                assert kc.blocks_fit("gated_gemv", b, 2 * n, k, 1) and kc.blocks_fit("norm_gated_gemv", b, 2 * n, k, 1)
                assert all(kc.blocks_fit("gated_gemv", nb, 2 * n, k, 1) for nb in kc.gemv_neighbours(b, k))
            for num_sms in (132, 78, 8):
                for b in kc.skinny_candidates(n, k, num_sms):
                    fits = [b, *kc.skinny_neighbours(b, k)]
                    assert all(kc.blocks_fit("skinny", f, n, k, rows) for f in fits for rows in (16, 32, 64)), (n, k, b)
                for op in kc.OPS:
                    for rows, on_gpu in ((1, True), (16, True), (65, True), (16, False), (64, False)):
                        c = kc.choice_for(op, 2 * n if "gate" in op else n, k, rows, on_gpu, num_sms)
                        assert kc.blocks_fit(c.kernel, c.blocks, c.n, c.k, c.rows), c
                        assert KernelChoice.from_dict(c.to_dict()) == c
            for b in kc.gated_skinny_candidates(k):
                assert all(kc.blocks_fit("gated_skinny", f, 2 * n, k, 32) for f in (b, *kc.gated_skinny_neighbours(b)))
    # K = 200 and 1000 have no K tile of 64 or more but the whole row (256, 1024): the rule's 8 is not timed
    assert {b[1] for b in kc.gemv_candidates(280, 200)} == {256}
    assert {b[1] for b in kc.gemv_candidates(200, 1000)} == {1024}
    assert kc.rule_choice("linear", 200, 1000, 1, True).kernel == "torch"  # (and the rule runs cuBLAS there)


def test_split_count_fills_the_gpu_in_powers_of_two():
    assert [kc.split_count(n, k, 132) for n, k in ((2048, 2048), (3072, 2048), (16384, 2048), (2048, 8192))] == [8, 4, 1, 8]
    assert kc.split_count(576, 576, 132, 64, 64) == 3 and kc.split_count(576, 576, 132, 64, 128) == 1  # 576 = 4.5 x 128
    assert kc.split_count(49152, 576, 132, 64, 64) == 1  # 768 column blocks fill the GPU already


def test_rules_without_a_measurement():
    assert kc.rule_choice("linear", 3072, 2048, 1, True, 132) == KernelChoice("linear", 3072, 2048, 1, "gemv", (4, 1024, 8))
    assert kc.rule_choice("gate_up", 16384, 2048, 1, True, 132).blocks == (1, 2048, 2)  # the GEMV rule's, half the columns
    assert kc.rule_choice("linear", 960, 576, 1, True, 132).kernel == "torch"  # a 64-wide K tile: cuBLAS by rule
    assert kc.rule_choice("linear", 3072, 2048, 16, True, 132).kernel == "torch"  # many rows on the GPU: cuBLAS
    assert kc.rule_choice("linear", 3072, 2048, 16, False, 132) == KernelChoice(
        "linear", 3072, 2048, 16, "skinny", (64, 128, 4, 4, 4))  # the interpreter: the skinny GEMM
    assert kc.rule_choice("gate_up", 256, 128, 16, False, 132).kernel == "skinny"
    assert kc.rule_choice("gate_up", 256, 128, 32, False, 132).kernel == "gated_skinny"


def test_an_installed_choice_wins_over_the_rule_for_its_class_only():
    chosen = KernelChoice("linear", 960, 576, 16, "skinny", (64, 64, 8, 4, 4), 2.0, 3.5, 9)
    kc.install([chosen])
    assert kc.choice_for("linear", 960, 576, 9, True, 132) is chosen  # 2..16 rows: class 16
    assert kc.choice_for("linear", 960, 576, 17, True, 132).kernel == "torch"  # class 32: nothing measured
    assert kc.choice_for("linear", 960, 576, 65, True, 132).kernel == "torch"  # above 64 rows: always cuBLAS
    assert kc.choice_for("gate_up", 960, 576, 9, True, 132).kernel == "torch"  # another op
    kc.forget_all()
    assert kc.choice_for("linear", 960, 576, 9, True, 132).kernel == "torch"


def test_a_stored_choice_is_checked_before_it_is_believed():
    good = KernelChoice("gate_up", 3072, 576, 32, "gated_skinny", (32, 64, 4, 3), 4.0, 5.0, 8)
    assert KernelChoice.from_dict(json.loads(json.dumps(good.to_dict()))) == good
    bad = [dict(good.to_dict(), kernel="gemv"),  # not a gate_up kernel
           dict(good.to_dict(), blocks=[32, 128, 4, 3]),  # K = 576 is not a multiple of 128
           dict(good.to_dict(), rows=8),  # not a row class
           dict(good.to_dict(), op="qkv"),
           dict(good.to_dict(), kernel="torch"),  # cuBLAS takes no blocks
           dict(good.to_dict(), blocks=[32, 0, 4, 3]), dict(good.to_dict(), blocks=[0, 64, 4, 3]),  # a zero tile
           dict(good.to_dict(), blocks=[32, 64, 3, 3]), dict(good.to_dict(), blocks=[24, 64, 4, 3]),  # 3 warps, 24
           dict(good.to_dict(), op="linear", kernel="skinny", blocks=[32, 64, 16, 4, 3]),  # 16 splits of K
           dict(good.to_dict(), blocks=[32, 64, 4, 12])]  # 12 stages
    for data in bad:
        with pytest.raises(ValueError):
            KernelChoice.from_dict(data)
    assert KernelChoice.from_dict(dict(good.to_dict(), op="linear", kernel="skinny", blocks=[32, 64, 3, 4, 5])).blocks[2] == 3
    # the LoRA epilogue's blocks are checked as its kernel's (gated_skinny for gate_up); an older entry has none
    cublas = dict(good.to_dict(), kernel="torch", blocks=[], epilogue_blocks=[32, 64, 4, 3])
    assert KernelChoice.from_dict(cublas).epilogue_blocks == (32, 64, 4, 3)
    assert KernelChoice.from_dict({k: v for k, v in cublas.items() if k != "epilogue_blocks"}).epilogue_blocks == ()
    # a one-row GEMV holds at most MAX_GEMV_STAGES weight tiles in flight (the kernel's own bound)
    from graphbench.runner.kernels.gemv import MAX_STAGES

    gemv = KernelChoice("linear", 896, 4864, 1, "gemv", (4, 256, 2, kc.MAX_GEMV_STAGES), 3.0, 8.0, 20)
    assert kc.MAX_GEMV_STAGES == MAX_STAGES and KernelChoice.from_dict(gemv.to_dict()) == gemv
    with pytest.raises(ValueError):
        KernelChoice.from_dict(dict(gemv.to_dict(), blocks=[4, 256, 2, MAX_STAGES + 1]))
    for epilogue in ([32, 128, 4, 3], [32, 64, 3, 4, 5], [0, 64, 4, 3]):  # K 576 / 128, a skinny's 5 blocks, 0
        with pytest.raises(ValueError):
            KernelChoice.from_dict(dict(cublas, epilogue_blocks=epilogue))


def test_the_search_takes_the_fastest_of_the_grid_and_its_neighbours():
    from graphbench.runner.kernel_bench import search as _search

    times = {(1,): 5.0, (2,): 4.0, (3,): None, (4,): 3.5, (5,): 3.0}
    asked = []

    def time_one(b):
        asked.append(b)
        return times.get(b)

    # coarse 1..3 -> best (2,), then (1,); (2,)'s neighbour (4,) is faster -> (4,)'s neighbour (5,) is timed too
    prepared = []
    found = _search(time_one, [(1,), (2,), (3,)], lambda b: [(b[0] + 2,)] if b[0] < 4 else [(5,)], prepared.append)
    assert found == ((5,), 3.0, 4) and asked == [(1,), (2,), (3,), (4,), (5,)]  # (3,) failed: not counted timed
    assert prepared == [[(1,), (2,), (3,)], [(4,)], [(5,)]]  # each round compiled before it is timed
    assert _search(lambda b: None, [(1,), (2,)], lambda b: []) is None  # nothing runs: no choice
    # a near-tie: the runner-up's neighbour is the fastest; the leader's alone would miss it
    near = {("a",): 3.0, ("b",): 3.1, ("a", 1): 3.2, ("b", 1): 2.5}
    found = _search(near.get, [("a",), ("b",)], lambda b: [(b[0], 1)] if len(b) == 1 else [])
    assert found == (("b", 1), 2.5, 4)


def test_the_fastest_kernel_is_chosen_against_cublas():
    from graphbench.runner import kernel_timing

    class FakeTimer:
        n, k, dtype = 960, 576, torch.bfloat16

        def __init__(self, times):
            self.times = times

        def time(self, op, kernel, blocks, rows):
            return self.times(kernel, blocks)

        def prepare(self, op, kernel, candidates, rows):
            pass  # nothing to compile

    slow_torch = FakeTimer(lambda kernel, blocks: 10.0 if kernel == "torch" else 2.0 + blocks[0] / 100 + blocks[1] / 1e4)
    got = kernel_timing._choose("linear", slow_torch, 1, 132)
    assert (got.kernel, got.blocks, got.torch_us) == ("gemv", (4, 64, 2), 10.0) and got.us == pytest.approx(2.0464)
    # the two fastest's neighbours: none in warps (2 warps at 256 and 512 values), 2 and 3 stages each for
    # their 9 K tiles
    assert got.candidates == 1 + len(kc.gemv_candidates(960, 576)) + 4
    assert got.epilogue_blocks == ()  # one row: no LoRA epilogue
    # cuBLAS wins: the LoRA epilogue's kernel keeps its own fastest blocks (gated_skinny for gate_up, skinny for
    # linear), which a step with adapters runs instead of the skinny rule's
    fast_torch = FakeTimer(lambda kernel, blocks: 1.0 if kernel == "torch" else 2.0 + blocks[0] / 100)
    got = kernel_timing._choose("gate_up", fast_torch, 32, 132)
    assert (got.kernel, got.blocks, got.us) == ("torch", (), 1.0)
    assert got.epilogue_blocks[0] == min(b[0] for b in kc.gated_skinny_candidates(576)) and len(got.epilogue_blocks) == 4
    got = kernel_timing._choose("linear", fast_torch, 16, 132)
    assert got.kernel == "torch" and len(got.epilogue_blocks) == 5
    assert got.epilogue_blocks[0] == min(b[0] for b in kc.skinny_candidates(960, 576, 132))
    assert KernelChoice.from_dict(json.loads(json.dumps(got.to_dict()))) == got
    gated = FakeTimer(lambda kernel, blocks: 1.5 if kernel == "gated_skinny" and blocks[3] == 5 else 3.0)
    got = kernel_timing._choose("gate_up", gated, 64, 132)
    assert got.blocks == (16, 64, 4, 5) and got.epilogue_blocks == ()  # the chosen kernel is the epilogue's


def _model_of(shapes: dict[str, tuple[int, int]], dtype=torch.bfloat16, qkv_bias: bool = False):
    """What kernel_timing reads of a model: layer 0's projections and lm_head (weights only)."""
    from types import SimpleNamespace

    def proj(name, bias=False):
        n, k = shapes[name]
        return SimpleNamespace(weight=torch.empty(n, k, dtype=dtype), bias=torch.empty(n, dtype=dtype) if bias else None)

    layer = SimpleNamespace(self_attn=SimpleNamespace(qkv_proj=proj("qkv", qkv_bias), o_proj=proj("o")),
                            mlp=SimpleNamespace(gate_up_proj=proj("gate_up"), down_proj=proj("down")))
    return SimpleNamespace(layers=[layer], lm_head=proj("lm_head"))


def _entry(tmp_path, name: str):
    """A compile-cache entry's folder (the engine makes it before the choices are written there)."""
    (tmp_path / name).mkdir(exist_ok=True)
    return tmp_path / name


SMOLLM2 = {"qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536), "lm_head": (49152, 576)}


GEMV = KernelChoice("linear", 960, 576, 1, "gemv", (8, 64, 2), 2.1, 3.6, 6)  # qkv's one-row choice in every set


def _made(kernel_timing, model, max_rows: int) -> list[KernelChoice]:
    """What the faked measure() chooses: one choice for each key the real one would (the rule's kernels,
    qkv's one-row GEMV timed)."""
    keys = sorted(kernel_timing.expected_keys(model, max_rows))
    return [GEMV if key == GEMV.key() else KernelChoice(*key, "unfused" if key[0].startswith("norm_") else "torch")
            for key in keys]


@pytest.fixture
def timing(tmp_path, monkeypatch):
    """kernel_timing with measure() faked (its calls counted) and the cache root under tmp_path."""
    from graphbench.runner import kernel_timing

    monkeypatch.setenv("GRAPHBENCH_CACHE_ROOT", str(tmp_path / "root"))
    calls = []
    monkeypatch.setattr(kernel_timing, "measure",
                        lambda model, max_rows: calls.append(max_rows) or _made(kernel_timing, model, max_rows))
    return kernel_timing, calls


def test_choices_are_kept_in_the_cache_entry(tmp_path, timing, monkeypatch):
    kernel_timing, calls = timing
    model = _model_of(SMOLLM2)
    made = [c.to_dict() for c in _made(kernel_timing, model, 8192)]
    assert len(made) == 5 * len(kc.ROW_CLASSES) + 2  # every projection at every row class; the two folds
    first = kernel_timing.load_or_measure(model, tmp_path, "NVIDIA H200", 8192)
    assert first["source"] == "measured" and calls == [8192] and first["choices"] == made
    assert kc.choice_for("linear", 960, 576, 1, True, 132) == GEMV
    kc.forget_all()
    second = kernel_timing.load_or_measure(model, tmp_path, "NVIDIA H200", 8192)  # a warm start: no timing
    assert second["source"] == "loaded" and calls == [8192] and second["choices"] == made
    assert kc.choice_for("linear", 960, 576, 1, True, 132) == GEMV
    assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "measured"
    path = tmp_path / kernel_timing.CHOICES_FILE
    edits = [lambda d: d.update(sources="0" * 12),  # written by other kernels' code: the entry's copy is not loaded
             lambda d: d.update(torch="2.0.0"),  # by another torch (its cuBLAS)
             lambda d: d["choices"][0].update(blocks=[8, 128, 2]),  # does not fit K = 576
             lambda d: d["choices"].pop(),  # a shape or row class missing
             lambda d: d.update(choices=[])]
    for edit in edits:
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data))
        assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "shared"
    for text in ("{not json", "[]", "[" * 100000 + "]" * 100000):  # not JSON; not the object written; too deep
        path.write_text(text)
        assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "shared"
    assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "loaded"
    monkeypatch.setenv("GRAPHBENCH_PDL", "0")  # timed without PDL launches: not what the engine runs by default
    assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "measured"
    assert json.loads((tmp_path / kernel_timing.NO_PDL_CHOICES_FILE).read_text())["pdl"] is False
    assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "loaded"
    monkeypatch.delenv("GRAPHBENCH_PDL")  # back to PDL: its own file, still there
    assert kernel_timing.load_or_measure(model, tmp_path, "NVIDIA A100-SXM4-80GB", 8192)["source"] == "loaded"
    assert json.loads(path.read_text())["pdl"] is True and len(calls) == 3


def test_a_new_config_loads_the_gpus_shared_choices(tmp_path, timing, caplog, monkeypatch):
    """A cold start with a new compile-cache entry and the same projection shapes, dtype, bias and row classes
    loads the choices a cold start timed on this GPU; anything else is timed, and so is a cold start that
    cleared its entry to be measured."""
    from graphbench.runner import kernel_choice_store as store
    from graphbench.runner.compile.cache import clear_kernel_choices, kernel_choice_files

    kernel_timing, calls = timing
    model = _model_of(SMOLLM2)
    made = [c.to_dict() for c in _made(kernel_timing, model, 8192)]
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "a"), "NVIDIA H200", 8192)["source"] == "measured"
    other = kernel_timing.load_or_measure(model, _entry(tmp_path, "b"), "NVIDIA H200", 8192)
    assert other["source"] == "shared" and other["choices"] == made and calls == [8192]
    assert json.loads((_entry(tmp_path, "b") / kernel_timing.CHOICES_FILE).read_text())["choices"] == made
    # not the same model for the store: a bias, a dtype, a shape, fewer row classes, another GPU
    for n, (changed, max_rows, device) in enumerate([
            (_model_of(SMOLLM2, qkv_bias=True), 8192, "NVIDIA H200"),
            (_model_of(SMOLLM2, dtype=torch.float16), 8192, "NVIDIA H200"),
            (_model_of({**SMOLLM2, "down": (576, 2048)}), 8192, "NVIDIA H200"),
            (model, 16, "NVIDIA H200"),
            (model, 8192, "NVIDIA H100 80GB HBM3")]):
        assert kernel_timing.load_or_measure(changed, _entry(tmp_path, f"c{n}"), device, max_rows)["source"] == "measured"
    assert len(calls) == 6
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "d"), "NVIDIA H200", 8192)["source"] == "shared"  # kept
    # a cold start that cleared its entry to be measured (--cold, a sweep's) times them again, as a first start
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "d2"), "NVIDIA H200", 8192, shared=False)["source"] == "measured"
    assert len(calls) == 7
    conditions = kernel_timing.timing_conditions("NVIDIA H200")
    path = store.store_path(conditions)
    assert path.name == f"NVIDIA-H200-pdl-{conditions['sources']}.json" and path.parent.name == "kernel_choices"
    assert len(json.loads(path.read_text())["sets"]) == 5  # the H200's: the model, its bias, dtype, shape and rows
    sources_hash = kernel_timing.sources_hash
    monkeypatch.setattr(kernel_timing, "sources_hash", lambda: "abcdef012345")  # another tree's kernels: its own file
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "e"), "NVIDIA H200", 8192)["source"] == "measured"
    monkeypatch.setattr(kernel_timing, "sources_hash", sources_hash)
    assert len(kernel_choice_files()) == 3 and len(json.loads(path.read_text())["sets"]) == 5
    data = json.loads(path.read_text())
    data["triton"] = "0.0.1"  # timed under another Triton: stale, dropped at the next write
    path.write_text(json.dumps(data))
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "f"), "NVIDIA H200", 8192)["source"] == "measured"
    assert len(json.loads(path.read_text())["sets"]) == 1
    key = next(iter(json.loads(path.read_text())["sets"]))
    for n, edit in enumerate([lambda c: c[0].update(blocks=[8, 128, 2]), lambda c: c.pop(), lambda c: c.clear()]):
        data = json.loads(path.read_text())
        edit(data["sets"][key]["choices"])  # a choice that does not fit K = 576; one missing; none
        path.write_text(json.dumps(data))
        with caplog.at_level("WARNING", logger="graphbench.engine"):
            assert kernel_timing.load_or_measure(model, _entry(tmp_path, f"g{n}"), "NVIDIA H200", 8192)["source"] == "measured"
    with caplog.at_level("WARNING", logger="graphbench.engine"):
        path.write_text("{not json")
        assert kernel_timing.load_or_measure(model, _entry(tmp_path, "h"), "NVIDIA H200", 8192)["source"] == "measured"
    assert sum("shared kernel choices" in r.message for r in caplog.records) == 4
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "i"), "NVIDIA H200", 8192)["source"] == "shared"
    assert clear_kernel_choices(kernel_choice_files()) == [] and kernel_choice_files() == []
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "j"), "NVIDIA H200", 8192)["source"] == "measured"


def test_a_store_that_cannot_be_written_or_is_linked_costs_only_the_timing(tmp_path, timing, caplog):
    kernel_timing, calls = timing
    model = _model_of(SMOLLM2)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "kernel_choices").write_text("a file where the store's folder goes")
    with caplog.at_level("WARNING", logger="graphbench.engine"):
        got = kernel_timing.load_or_measure(model, _entry(tmp_path, "a"), "NVIDIA H200", 8192)
    assert got["source"] == "measured" and got["choices"] == [c.to_dict() for c in _made(kernel_timing, model, 8192)]
    assert any("not shared" in r.message for r in caplog.records)
    assert kernel_timing.load_or_measure(model, _entry(tmp_path, "a"), "NVIDIA H200", 8192)["source"] == "loaded"
    (tmp_path / "root" / "kernel_choices").unlink()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root" / "kernel_choices").symlink_to(tmp_path / "elsewhere")  # neither read nor written
    for name in ("b", "c"):
        assert kernel_timing.load_or_measure(model, _entry(tmp_path, name), "NVIDIA H200", 8192)["source"] == "measured"
    assert list((tmp_path / "elsewhere").iterdir()) == [] and len(calls) == 3


def test_the_run_summary_names_the_choices():
    from graphbench.cli.run import kernel_choices_line, precompiled_note

    assert precompiled_note([14, 3.25]) == " (14 kernels compiled ahead in 3.2 s)" and precompiled_note([0, 0.0]) == ""

    record = {"source": "measured", "seconds": 3.24, "choices": [
        {"kernel": "gemv"}, {"kernel": "gemv"}, {"kernel": "skinny"}, {"kernel": "torch"}]}
    assert kernel_choices_line(record) == "projection kernels (gemv 2, skinny 1, torch 1): timed in 3.2 s"
    assert kernel_choices_line(dict(record, source="loaded", seconds=0.01)).endswith("): loaded in 0.0 s")
    assert kernel_choices_line(dict(record, source="shared", seconds=0.02)).endswith(
        "): loaded as this GPU timed them for another config in 0.0 s")
    assert kernel_choices_line(dict(record, source="shared", search="ab-r2", seconds=0.02)).endswith(
        "): loaded from the search ab-r2 in 0.0 s")  # a sweep round's own search
    assert kernel_choices_line(dict(record, search="ab-r2")).endswith("): timed (the search ab-r2 was not stored) in 3.2 s")
    assert "rules" in kernel_choices_line({"source": "rules"}) and kernel_choices_line({}) == ""
    folded = dict(record, choices=record["choices"] + [{"op": "norm_linear", "kernel": "norm_gemv"},
                                                        {"op": "norm_gate_up", "kernel": "unfused"}])
    assert kernel_choices_line(folded) == ("projection kernels (gemv 2, skinny 1, torch 1; add-norm folded into 1 of 2 "
                                           "one-row GEMVs): timed in 3.2 s")
    earlier = {"source": "earlier in this process", "seconds": 0.0, "choices": [{"kernel": "gemv"}]}
    assert kernel_choices_line(earlier) == "projection kernels (gemv 1): as an earlier engine of this process timed them"


def test_an_engine_that_timed_nothing_reports_what_its_projections_run():
    from graphbench.config.arch import load_arch
    from graphbench.runner.kernel_timing import without_entry
    from graphbench.runner.loader import build_model

    model = build_model(load_arch("tiny-llama"), 64, torch.float32, torch.device("cpu"))
    assert without_entry(model) == {"source": "rules", "seconds": 0.0, "choices": []}
    n, k = model.layers[0].self_attn.o_proj.weight.shape
    mine = KernelChoice("linear", n, k, 1, "gemv", (4, 64, 2))
    kc.install([mine, KernelChoice("linear", 7, 64, 1, "gemv", (4, 64, 2))])  # another model's shape: not listed
    assert without_entry(model) == {"source": "earlier in this process", "seconds": 0.0, "choices": [mine.to_dict()]}


def test_the_add_norm_is_folded_into_the_gemv_only_where_that_was_clearly_faster(monkeypatch):
    """norm_fold_timing.choose_fold: the add-norm launch + the op's own choice against the one-launch
    norm_gemv candidates, the fold kept only where it wins by FOLD_MIN_GAIN; the rule (nothing timed) keeps
    them apart."""
    from graphbench.runner import norm_fold_timing as fold

    class Timer:
        n, k, dtype = 960, 576, torch.bfloat16
        copies = [None]

    plain = KernelChoice("linear", 960, 576, 1, "gemv", (4, 64, 2), 2.0, 3.0, 6)
    monkeypatch.setattr(fold, "compile_all", lambda calls: None)
    monkeypatch.setattr(fold, "time_norm", lambda timer, op, kernel, blocks, p: 5.0 if kernel == "unfused" else 4.0 + blocks[0] / 100 + blocks[1] / 1e4)
    got = fold.choose_fold("linear", Timer(), plain)
    assert (got.op, got.kernel, got.blocks, got.torch_us) == ("norm_linear", "norm_gemv", (4, 64, 2), 5.0)
    assert got.us == pytest.approx(4.0464) and kc.blocks_fit(got.kernel, got.blocks, 960, 576, 1)
    monkeypatch.setattr(fold, "time_norm", lambda timer, op, kernel, blocks, p: 3.0 if kernel == "unfused" else 4.0)
    got = fold.choose_fold("gate_up", Timer(), plain)
    assert (got.op, got.kernel, got.us, got.torch_us) == ("norm_gate_up", "unfused", 3.0, 3.0)
    # a fold faster alone by less than the margin stays apart (a near-tie alone was slower in the step)
    near = 5.0 * (1 - fold.FOLD_MIN_GAIN / 2)
    monkeypatch.setattr(fold, "time_norm", lambda timer, op, kernel, blocks, p: 5.0 if kernel == "unfused" else near)
    got = fold.choose_fold("gate_up", Timer(), plain)
    assert (got.op, got.kernel, got.us, got.torch_us) == ("norm_gate_up", "unfused", 5.0, 5.0)
    clear = 5.0 * (1 - 2 * fold.FOLD_MIN_GAIN)
    monkeypatch.setattr(fold, "time_norm", lambda timer, op, kernel, blocks, p: 5.0 if kernel == "unfused" else clear)
    assert fold.choose_fold("gate_up", Timer(), plain).kernel == "norm_gated_gemv"
    assert kc.rule_choice("norm_linear", 960, 576, 1, True).kernel == "unfused"
    assert KernelChoice.from_dict(dict(got.to_dict(), kernel="norm_gated_gemv", blocks=[2, 64, 2])).kernel == "norm_gated_gemv"
    with pytest.raises(ValueError):
        KernelChoice.from_dict(dict(got.to_dict(), kernel="gemv", blocks=[2, 64, 2]))  # not a norm op's kernel


def test_a_start_on_a_named_search_loads_that_search_and_leaves_its_entry_alone(tmp_path, timing, caplog):
    """config.model.kernel_search: a sweep round's start loads the choices its round's search apart stored
    under that name (a store file of its own), never its entry's, and does not overwrite the entry's."""
    from graphbench.runner import kernel_choice_store as store

    kernel_timing, calls = timing
    model = _model_of(SMOLLM2)
    entry = _entry(tmp_path, "a")
    assert kernel_timing.load_or_measure(model, entry, "NVIDIA H200", 8192)["source"] == "measured"  # round 1's cold start
    entry_text = (entry / kernel_timing.CHOICES_FILE).read_text()
    searched = kernel_timing.search_apart(model, "NVIDIA H200", 8192, "f00d-r2")  # the round's search, apart
    assert searched["choices"] == len(_made(kernel_timing, model, 8192)) and calls == [8192, 8192]
    path = store.store_path(kernel_timing.timing_conditions("NVIDIA H200", "f00d-r2"))
    assert path.name.endswith("-f00d-r2.json") and json.loads(path.read_text())["search"] == "f00d-r2"
    got = kernel_timing.load_or_measure(model, entry, "NVIDIA H200", 8192, search="f00d-r2")  # the round's warm start
    assert (got["source"], got["search"]) == ("shared", "f00d-r2") and len(calls) == 2  # nothing timed
    assert (entry / kernel_timing.CHOICES_FILE).read_text() == entry_text  # the entry keeps its cold start's
    assert kernel_timing.load_or_measure(model, entry, "NVIDIA H200", 8192)["source"] == "loaded"
    # the unnamed store does not answer for a name, nor a name for another name or GPU: timed, with a warning
    with caplog.at_level("WARNING", logger="graphbench.engine"):
        other = kernel_timing.load_or_measure(model, entry, "NVIDIA H200", 8192, search="f00d-r3")
        assert other["source"] == "measured" and len(calls) == 3
        assert kernel_timing.load_or_measure(model, entry, "NVIDIA H100 80GB HBM3", 8192,
                                             search="f00d-r2")["source"] == "measured"
    assert sum("no kernel choices stored under the search" in r.message for r in caplog.records) == 2
    assert kernel_timing.load_or_measure(model, entry, "NVIDIA H200", 8192, search="f00d-r3")["source"] == "shared"
