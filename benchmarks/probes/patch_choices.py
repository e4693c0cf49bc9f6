"""Probe (run once on 2026-12-07; finding in benchmarks/RESULTS.md): copy a cache root and rewrite one kernel choice in every JSON under it.
usage: probe_patch_choices.py SRC DST OP N KERNEL BLOCKS(comma list or '-')"""
import json, shutil, sys
from pathlib import Path

src, dst, op, n, kernel, blocks = sys.argv[1:7]
blocks = [] if blocks == "-" else [int(b) for b in blocks.split(",")]
shutil.copytree(src, dst, symlinks=True)
changed = 0

def walk(node):
    global changed
    if isinstance(node, dict):
        if node.get("op") == op and node.get("n") == int(n) and node.get("rows") == 1 and "kernel" in node:
            print(f"  {node['kernel']} {node['blocks']} {node['us']} -> {kernel} {blocks}")
            node["kernel"], node["blocks"] = kernel, blocks
            if kernel == "unfused":
                node["us"] = node["torch_us"]
            changed += 1
        for v in node.values():
            walk(v)
    elif isinstance(node, list):
        for v in node:
            walk(v)

for path in Path(dst).rglob("*.json"):
    if path.is_symlink():
        continue
    try:
        data = json.loads(path.read_text())
    except Exception:
        continue
    before = changed
    walk(data)
    if changed != before:
        path.write_text(json.dumps(data, indent=1))
        print("patched", path)
print("changed", changed)
