# probe: what a stream's first cuBLAS call and a first capture cost in device memory (MiB of mem_get_info);
# python3 benchmarks/probes/stream_first_cublas.py side-first|default-first|both
import sys, torch
d = 'cuda'; mib = lambda v: round(v / 2**20, 1)
def free():
    torch.cuda.synchronize(); torch.cuda.empty_cache(); return torch.cuda.mem_get_info()[0]
variant = sys.argv[1]
torch.ones(1, device=d); r = {'start': free()}
x = torch.ones(64, 2048, device=d, dtype=torch.bfloat16); w = torch.ones(2048, 2048, device=d, dtype=torch.bfloat16)
r['tensors'] = free()
if variant in ('default-first', 'both'):
    torch.nn.functional.linear(x, w); r['eager default stream'] = free()
s = torch.cuda.Stream()
if variant in ('side-first', 'both'):
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s): torch.nn.functional.linear(x, w)
    r['eager side stream'] = free()
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s, capture_error_mode='relaxed'): torch.nn.functional.linear(x, w)
g.replay(); r['captured'] = free()
del g; r['graph deleted'] = free()
g2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g2, stream=s, capture_error_mode='relaxed'): torch.nn.functional.linear(x, w)
g2.replay(); r['second capture'] = free()
keys = list(r); print(variant, {k: mib(r[keys[i-1]] - r[k]) for i, k in enumerate(keys) if i}, 'reserved', mib(torch.cuda.memory_reserved()))
