"""Split a Dynamo FX graph at the splitting ops (attention): pieces between them get compiled; each
piece's fake inputs, read from the traced graph."""

from __future__ import annotations

from dataclasses import dataclass

import torch.fx as fx
from torch.fx.passes.split_module import split_module


@dataclass(frozen=True)
class Piece:
    name: str  # attribute of the split module, e.g. "submod_0"
    index: int
    is_splitting_op: bool


def op_name(node: fx.Node) -> str | None:
    """'graphbench::attention' for a call to that op (any overload), else None."""
    if node.op != "call_function":
        return None
    schema = getattr(node.target, "_schema", None)
    return schema.name if schema is not None else None


def split_graph(gm: fx.GraphModule, splitting_ops: list[str]) -> tuple[fx.GraphModule, list[Piece]]:
    """Each splitting-op call becomes its own piece; everything between becomes one piece."""
    piece_of: dict[fx.Node, int] = {}
    current = 0
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if op_name(node) in splitting_ops:
            current += 1
            piece_of[node] = current
            current += 1
        else:
            piece_of[node] = current
    split = split_module(gm, None, lambda node: piece_of[node], keep_original_order=True)
    split_at = {piece_of[n] for n in gm.graph.nodes if op_name(n) in splitting_ops}
    pieces = []
    for name, _module in split.named_children():
        index = int(name.rsplit("_", 1)[1])
        pieces.append(Piece(name, index, index in split_at))
    return split, sorted(pieces, key=lambda p: p.index)


def fake_args_from_meta(gm: fx.GraphModule, split: fx.GraphModule, names: list[str]) -> dict[str, list] | None:
    """Each piece's fake inputs, read from the traced graph's node metadata (no re-propagation).

    split_module names a piece's placeholders after the traced nodes they stand for. None if
    any input cannot be found (the caller then propagates fake tensors instead).
    """
    values = {}
    for node in gm.graph.nodes:
        value = node.meta.get("example_value", node.meta.get("val"))
        if value is not None:
            values[node.name] = value
    result = {}
    for name in names:
        placeholders = [n.name for n in getattr(split, name).graph.nodes if n.op == "placeholder"]
        if any(p not in values for p in placeholders):
            return None
        result[name] = [values[p] for p in placeholders]
    return result
