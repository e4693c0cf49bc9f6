"""The KV cache in reserved virtual memory, so that it can be sized after the CUDA graphs are recorded.

A recording bakes in the KV tensors' addresses, so the cache must exist before capture. Reserving the
addresses first (cuMemAddressReserve) and backing them with physical memory later (cuMemCreate +
cuMemMap) lets the capture come first and the cache take what the recordings left: the order of SGLang's
post-capture KV sizing (sgl-project/sglang#30157). Each layer's K and each layer's V is one reserved region
with room for as many blocks as the whole device could hold (all regions together: about the device's memory
in addresses, none of it physical); a probe's worth of blocks at each region's start is backed for the warm-up
and the recordings (their dummy batches address only those), the rest once the free memory after capture is
known.
"""

from __future__ import annotations

import ctypes
import weakref
from dataclasses import dataclass

from graphbench.errors import GraphbenchError


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def blocks_fitting(budget_bytes: int, num_regions: int, region_block_bytes: int, granularity: int) -> int:
    """The most blocks whose backing (each of num_regions regions rounded up to whole granules) fits the budget."""
    per_region = budget_bytes // num_regions // granularity * granularity
    return max(0, per_region // region_block_bytes)


def probe_blocks(region_block_bytes: int, granularity: int) -> int:
    """The blocks backed before capture: one granule's worth a region (at least one block)."""
    return max(1, granularity // region_block_bytes)


class _Driver:
    """The few CUDA driver calls the arena makes (libcuda through ctypes; torch exposes none of them)."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise GraphbenchError(f"KV sizing after capture needs the CUDA driver library: {exc}") from None

    def __call__(self, name: str, *args) -> None:
        result = getattr(self.lib, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(text))
            detail = text.value.decode() if text.value else f"error {result}"
            raise GraphbenchError(f"{name} failed while sizing the KV cache after capture: {detail}")


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _AllocationProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", _Location),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", _AllocFlags)]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


_PINNED, _ON_DEVICE, _READ_WRITE, _MINIMUM_GRANULARITY = 1, 1, 3, 0


class _Span:
    """Device bytes a tensor can view (torch reads __cuda_array_interface__ without copying). It keeps the
    reservation alive: the addresses are given back only once no view of them is left."""

    def __init__(self, address: int, nbytes: int, owner: "_Reservation") -> None:
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 3, "strides": None}


def _unmap_all(driver: _Driver, mappings: list[tuple[int, int, int]]) -> None:
    """Unmap and release each (address, bytes, handle), removed from the list as it goes."""
    while mappings:
        address, nbytes, handle = mappings[-1]
        driver("cuMemUnmap", ctypes.c_uint64(address), ctypes.c_size_t(nbytes))
        mappings.pop()
        driver("cuMemRelease", ctypes.c_uint64(handle))


def _free_reservation(driver: _Driver, base: int, nbytes: int, mappings: list[tuple[int, int, int]]) -> None:
    """When the reservation is garbage (no arena, no view): what is still mapped, then the addresses."""
    try:
        _unmap_all(driver, mappings)
    finally:
        driver("cuMemAddressFree", ctypes.c_uint64(base), ctypes.c_size_t(nbytes))


class _Reservation:
    """Reserved addresses and the physical memory mapped into them; freed by a finalizer when unreferenced (an
    engine whose start-up failed after reserving never calls release)."""

    def __init__(self, driver: _Driver, nbytes: int, alignment: int) -> None:
        base = ctypes.c_uint64()
        driver("cuMemAddressReserve", ctypes.byref(base), ctypes.c_size_t(nbytes), ctypes.c_size_t(alignment),
               ctypes.c_uint64(0), ctypes.c_ulonglong(0))
        self.base, self.mappings = base.value, []
        finalizer = weakref.finalize(self, _free_reservation, driver, self.base, nbytes, self.mappings)
        finalizer.atexit = False  # (at exit the process gives everything back)


@dataclass
class KVArena:
    """Per layer a K and a V region of reserved addresses, backed up to `backed_blocks` blocks."""

    device_index: int
    region_block_bytes: int  # one block of one layer's K (or V)
    max_blocks: int
    driver: _Driver
    granularity: int = 0
    region_bytes: int = 0
    num_regions: int = 0
    backed_blocks: int = 0
    reservation: _Reservation | None = None

    @classmethod
    def reserve(cls, num_layers: int, region_block_bytes: int, max_blocks: int, device_index: int) -> "KVArena":
        arena = cls(device_index, region_block_bytes, max_blocks, _Driver())
        granularity = ctypes.c_size_t()
        arena.driver("cuMemGetAllocationGranularity", ctypes.byref(granularity), ctypes.byref(arena._prop()),
                     _MINIMUM_GRANULARITY)
        arena.granularity = granularity.value
        arena.num_regions = 2 * num_layers
        arena.region_bytes = round_up(max_blocks * region_block_bytes, arena.granularity)
        arena.reservation = _Reservation(arena.driver, arena.region_bytes * arena.num_regions, arena.granularity)
        return arena

    @property
    def mapped_bytes(self) -> int:
        return sum(nbytes for _, nbytes, _ in self.reservation.mappings)

    def region_address(self, index: int) -> int:
        return self.reservation.base + index * self.region_bytes

    def span(self, index: int) -> _Span:
        return _Span(self.region_address(index), self.region_bytes, self.reservation)

    def back(self, num_blocks: int) -> None:
        """Back every region's first num_blocks blocks with physical memory (what is backed stays); all regions
        or, on a failure, none."""
        if num_blocks > self.max_blocks:
            raise GraphbenchError(f"the KV arena holds at most {self.max_blocks} blocks, asked for {num_blocks}")
        done = round_up(self.backed_blocks * self.region_block_bytes, self.granularity)
        wanted = round_up(num_blocks * self.region_block_bytes, self.granularity)
        if wanted > done:
            made: list[tuple[int, int, int]] = []
            try:
                for index in range(self.num_regions):
                    made.append(self._map(self.region_address(index) + done, wanted - done))
            except BaseException:
                _unmap_all(self.driver, made)
                raise
            self.reservation.mappings.extend(made)
        self.backed_blocks = max(self.backed_blocks, num_blocks)

    def _map(self, address: int, nbytes: int) -> tuple[int, int, int]:
        handle = ctypes.c_uint64()
        self.driver("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(nbytes), ctypes.byref(self._prop()),
                    ctypes.c_ulonglong(0))
        try:
            self.driver("cuMemMap", ctypes.c_uint64(address), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                        handle, ctypes.c_ulonglong(0))
        except BaseException:
            self.driver("cuMemRelease", handle)
            raise
        mapping = (address, nbytes, handle.value)
        access = _AccessDesc(_Location(_ON_DEVICE, self.device_index), _READ_WRITE)
        try:
            self.driver("cuMemSetAccess", ctypes.c_uint64(address), ctypes.c_size_t(nbytes), ctypes.byref(access),
                        ctypes.c_size_t(1))
        except BaseException:
            _unmap_all(self.driver, [mapping])
            raise
        return mapping

    def release(self) -> None:
        """Give the physical memory back now (nothing may read the views after); the addresses go when the
        last view of them does (a stale view then faults instead of reading memory someone else got)."""
        _unmap_all(self.driver, self.reservation.mappings)
        self.backed_blocks = 0

    def _prop(self) -> _AllocationProp:
        prop = _AllocationProp()
        prop.type, prop.location = _PINNED, _Location(_ON_DEVICE, self.device_index)
        return prop
