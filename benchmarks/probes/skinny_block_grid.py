"""Probe: the skinny GEMM over a wide block grid at 16 and 64 rows for the small models' shapes."""
import json, os, itertools
import torch
from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernel_bench import ProjectionTimer
from graphbench.runner.kernels.paged_attention import sm_count
from graphbench.runner.kernels.pdl import graph_launches

SHAPES = {"smollm2": [(960, 576), (576, 576), (576, 1536)], "qwen-0.5b": [(1152, 896), (896, 896), (896, 4864)],
          "llama-1b": [(3072, 2048), (2048, 2048), (2048, 8192)]}
sms = sm_count(0)
out = []
with graph_launches(), torch.no_grad():
    for model, shapes in SHAPES.items():
        for n, k in shapes:
            w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
            t = ProjectionTimer(w, None)
            for rows in (16, 64):
                grid = [(bn, bk, s, wp, st) for bn in (16, 32, 64) for bk in (32, 64, 128, 256)
                        for s in (1, 2, 3, 4, 6, 8) for wp in (4,) for st in (3, 5)
                        if k % (bk * s) == 0 and (n // bn) * s <= 4 * sms]
                t.prepare("linear", "skinny", grid, rows)
                res = []
                for b in grid:
                    us = t.time("linear", "skinny", b, rows)
                    if us is not None:
                        res.append((round(us, 2), b))
                res.sort()
                chosen = kc.skinny_candidates(n, k, sms)
                row = {"model": model, "n": n, "k": k, "rows": rows, "torch": round(t.time("linear", "torch", (), rows), 2),
                       "best5": res[:5], "searched_coarse": [(round(u, 2), b) for u, b in res if b in chosen]}
                print(json.dumps(row), flush=True)
                out.append(row)
            del t, w
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "grid.json"), "w"), indent=1)
