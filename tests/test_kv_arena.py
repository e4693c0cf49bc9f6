"""runner/kv_arena.py against a fake CUDA driver (no GPU): what is mapped where, all regions or none on a
failure, physical memory given back at release, and the addresses only once no view of them is left."""

from __future__ import annotations

import gc

import pytest

from graphbench.errors import GraphbenchError
from graphbench.runner import kv_arena

MIB = 2**20


class FakeDriver:
    """Records the calls; maps must not overlap; `fail` names a call that fails on its n-th use."""

    def __init__(self, fail: tuple[str, int] | None = None):
        self.calls: list[str] = []
        self.fail = fail
        self.mapped: dict[int, int] = {}  # address -> bytes
        self.live_handles: set[int] = set()
        self.reserved: dict[int, int] = {}

    def __call__(self, name, *args):
        self.calls.append(name)
        if self.fail and name == self.fail[0] and self.calls.count(name) == self.fail[1]:
            raise GraphbenchError(f"{name} failed")
        if name == "cuMemGetAllocationGranularity":
            args[0]._obj.value = 2 * MIB
        elif name == "cuMemAddressReserve":
            args[0]._obj.value = 1 << 40
            self.reserved[1 << 40] = args[1].value
        elif name == "cuMemCreate":
            args[0]._obj.value = len(self.calls)
            self.live_handles.add(len(self.calls))
        elif name == "cuMemMap":
            address, nbytes = args[0].value, args[1].value
            assert all(a + n <= address or address + nbytes <= a for a, n in self.mapped.items()), "overlap"
            self.mapped[address] = nbytes
        elif name == "cuMemUnmap":
            del self.mapped[args[0].value]
        elif name == "cuMemRelease":
            self.live_handles.remove(args[0].value)
        elif name == "cuMemAddressFree":
            del self.reserved[args[0].value]


def arena(monkeypatch, driver: FakeDriver) -> kv_arena.KVArena:
    monkeypatch.setattr(kv_arena, "_Driver", lambda: driver)
    # 2 layers: 4 regions of 16 KiB blocks, 1000 blocks reserved each (16000 KiB, rounded to 16 MiB)
    return kv_arena.KVArena.reserve(2, 16 << 10, 1000, 0)


def test_backing_grows_every_region_by_whole_granules(monkeypatch):
    driver = FakeDriver()
    a = arena(monkeypatch, driver)
    assert a.region_bytes == 16 * MIB and driver.reserved == {1 << 40: 64 * MIB}
    a.back(kv_arena.probe_blocks(16 << 10, a.granularity))  # 128 blocks: one granule a region
    assert a.mapped_bytes == 4 * 2 * MIB and sorted(driver.mapped) == [(1 << 40) + i * 16 * MIB for i in range(4)]
    a.back(300)  # 300 x 16 KiB = 4.7 MiB -> 6 MiB a region: 4 MiB more each, right after the first granule
    assert a.mapped_bytes == 4 * 6 * MIB and a.backed_blocks == 300
    assert driver.mapped[(1 << 40) + 2 * MIB] == 4 * MIB
    a.back(200)  # already backed: nothing mapped
    assert a.mapped_bytes == 4 * 6 * MIB and a.backed_blocks == 300
    with pytest.raises(GraphbenchError, match="at most 1000 blocks"):
        a.back(1001)


def test_a_failed_grow_maps_nothing_and_can_be_retried(monkeypatch):
    driver = FakeDriver(fail=("cuMemMap", 7))  # the 4 probe maps pass, the grow's third region fails
    a = arena(monkeypatch, driver)
    a.back(128)
    with pytest.raises(GraphbenchError, match="cuMemMap failed"):
        a.back(300)
    assert a.backed_blocks == 128 and a.mapped_bytes == 4 * 2 * MIB and len(driver.mapped) == 4
    assert len(driver.live_handles) == 4  # the failed grow's handles are released too
    a.back(300)  # no overlap with anything left behind
    assert a.mapped_bytes == 4 * 6 * MIB


def test_release_gives_memory_back_and_the_addresses_go_with_the_last_view(monkeypatch):
    driver = FakeDriver()
    a = arena(monkeypatch, driver)
    a.back(300)
    view = a.span(1)
    a.release()
    assert driver.mapped == {} and driver.live_handles == set() and a.mapped_bytes == 0
    del a
    gc.collect()
    assert driver.reserved  # a view is left: its addresses stay reserved (a stale read faults)
    del view
    gc.collect()
    assert driver.reserved == {}


def test_an_arena_dropped_without_release_frees_everything(monkeypatch):
    """An engine whose start-up failed after reserving never calls release: the finalizer does its work."""
    driver = FakeDriver()
    a = arena(monkeypatch, driver)
    a.back(300)
    del a
    gc.collect()
    assert driver.mapped == {} and driver.live_handles == set() and driver.reserved == {}
