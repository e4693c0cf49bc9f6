"""Probe: GEMV over 2/4/8 rows vs skinny vs cuBLAS per shape (tag lost/gemv-rows-one-partial-a-row)."""
import json, os, sys, time
import torch
from graphbench.runner import kernel_choice as kc
from graphbench.runner.kernel_bench import ProjectionTimer, search
from graphbench.runner.kernels.paged_attention import sm_count
from graphbench.runner.kernels.pdl import graph_launches

SHAPES = {"llama-1b": [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192), (128256, 2048)],
          "qwen-0.5b": [(1152, 896), (896, 896), (9728, 896), (896, 4864)],
          "smollm2": [(960, 576), (576, 576), (3072, 576), (576, 1536)],
          "llama-8b": [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]}
sms = sm_count(0)
out = []
with graph_launches(), torch.no_grad():
    for model, shapes in SHAPES.items():
        for n, k in shapes:
            w = torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * 0.02
            t = ProjectionTimer(w, None)
            row = {"model": model, "n": n, "k": k}
            g = search(lambda b: t.time("linear", "gemv", b, 1), kc.gemv_candidates(n, k),
                       lambda b: kc.gemv_neighbours(b, k), lambda bl: t.prepare("linear", "gemv", bl, 1))
            row["gemv1"] = g and (g[0], round(g[1], 2))
            for rows in (2, 4, 8):
                r = {"torch": round(t.time("linear", "torch", (), rows), 2)}
                for kern, cand, nb in (("skinny", kc.skinny_candidates(n, k, sms), lambda b: kc.skinny_neighbours(b, k)),
                                       ("gemv_rows", kc.gemv_rows_candidates(n, k), lambda b: kc.gemv_rows_neighbours(b, k))):
                    f = search(lambda b, kern=kern: t.time("linear", kern, b, rows), cand, nb,
                               lambda bl, kern=kern: t.prepare("linear", kern, bl, rows)) if cand else None
                    r[kern] = f and (f[0], round(f[1], 2))
                row[rows] = r
            print(json.dumps(row), flush=True)
            out.append(row)
            del t, w
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "probe.json"), "w"), indent=1)
