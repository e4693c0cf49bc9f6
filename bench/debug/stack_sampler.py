"""A sampling profiler for the debug aids: other threads' Python stacks, every few milliseconds.

cProfile charges its own per-call overhead to whichever frames make many calls, which inflated the
custom-op shim to 40% of an eager step in session 6 when it was 3%. A sampler costs the same per
sample wherever the time goes, so its proportions hold. It sees Python frames only: time in a C
call (a kernel launch, a cuBLAS call) counts for the Python frame that made it.

    sampler = StackSampler(interval_s=0.0005, threads={threading.main_thread().ident})
    sampler.start(); sampler.active.set(); ...work...; sampler.active.clear(); sampler.stop()
    print(sampler.report(top=25))

The sampler needs the GIL to read the stacks: while it runs, the interpreter's switch interval is
lowered to the sampling interval (restored by stop), or a busy main thread would be sampled only
every 5 ms.
"""

from __future__ import annotations

import collections
import os
import sys
import threading


class StackSampler:
    def __init__(self, interval_s: float = 0.02, threads: set[int] | None = None):
        self.interval_s = interval_s
        self.threads = threads  # idents to sample (None: every thread but the sampler)
        self.active = threading.Event()  # samples are taken only while this is set
        self.inclusive: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.leaf: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.counts: collections.Counter = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stack-sampler", daemon=True)
        self._switch_interval = sys.getswitchinterval()

    def start(self) -> "StackSampler":
        sys.setswitchinterval(min(self._switch_interval, self.interval_s))
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._switch_interval)

    def _run(self) -> None:
        me = threading.get_ident()
        names: dict[int, str] = {}
        while not self._stop.wait(self.interval_s):
            if not self.active.is_set():
                continue
            names.update({t.ident: t.name for t in threading.enumerate()})
            for ident, frame in sys._current_frames().items():
                if ident == me or (self.threads is not None and ident not in self.threads):
                    continue
                self._record(names.get(ident, str(ident)), frame)

    def _record(self, thread: str, frame) -> None:
        self.counts[thread] += 1
        seen = set()
        innermost = True
        while frame is not None:
            code = frame.f_code
            key = f"{code.co_name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"
            if innermost:
                self.leaf[thread][key] += 1
                innermost = False
            if key not in seen:  # recursion counts once per sample
                self.inclusive[thread][key] += 1
                seen.add(key)
            frame = frame.f_back

    def report(self, top: int = 25) -> str:
        """Per thread: the most frequent innermost frames (own time) and frames on the stack (inclusive)."""
        lines = []
        for thread, n in self.counts.most_common():
            lines.append(f"== thread {thread}: {n} samples ({n * self.interval_s:.1f} s at {self.interval_s * 1e3:g} ms)")
            for title, counter in (("innermost (own time)", self.leaf[thread]), ("on the stack (inclusive)", self.inclusive[thread])):
                lines.append(f"  {title}:")
                lines += [f"    {100 * c / n:5.1f}%  {key}" for key, c in counter.most_common(top)]
        return "\n".join(lines)
