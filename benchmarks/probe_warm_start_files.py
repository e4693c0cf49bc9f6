"""Which files does each start write into the cache root: a cold start, then three warm ones (fresh processes)."""
import collections, os, sys, time
root = os.environ["GRAPHBENCH_CACHE_ROOT"]
from graphbench.config import load_engine_config
from graphbench.bench.cold_start import start_in_child

def snap():
    out = {}
    for d, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(d, f)
            try:
                st = os.stat(p); out[p] = (st.st_mtime_ns, st.st_size)
            except OSError:
                pass
    return out

cfg = load_engine_config(None, {"model.model": sys.argv[1], "optimization_level": 2, "scheduler.max_num_seqs": 256})
before = snap()
for i, cold in enumerate([True, False, False, False]):
    t = time.time(); rec = start_in_child(cfg, cold=cold); wall = time.time() - t
    now = snap()
    new = [p for p in now if p not in before]; changed = [p for p in now if p in before and now[p] != before[p]]
    print(f"start {i} cold={cold} total_s={rec['total_s']:.2f} capture_s={rec['capture_s']:.2f} load_s={rec['load_s']:.2f} "
          f"wall={wall:.1f} new={len(new)} changed={len(changed)}", flush=True)
    if i > 0:
        by_dir = collections.Counter(os.path.dirname(p).replace(root, "")[:90] for p in new + changed)
        for d, n in by_dir.most_common(12):
            print(f"    {n:4d} {d}")
    before = now
