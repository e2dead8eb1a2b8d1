"""Fold ``run_decompositions()``'s 1-D pooling — ``unsqueeze(-2)`` → 2-D pooling with a 1×k
window (or, for ``adaptive_avg_pool1d(1)``, a keepdim mean over the last two dims) →
``squeeze(-2)`` — back into the 1-D pooling (``F.max_pool1d``, ``F.avg_pool1d``,
``F.adaptive_avg_pool1d``, ``F.adaptive_max_pool1d``): one ncnn ``Pooling1D`` instead of a
reshape, a 2-D ``Pooling`` and another reshape."""
from __future__ import annotations

from ._rewrite import replace_chain
from .manager import graph_pass

_POOLS = ("F.max_pool2d", "F.avg_pool2d", "F.adaptive_avg_pool2d", "F.adaptive_max_pool2d", "torch.mean")


def _dim(value, rank: int) -> int | None:
    dims = value if isinstance(value, list) else [value]
    return dims[0] % rank if len(dims) == 1 and isinstance(dims[0], int) else None


def _sole_reader(op, types):
    users = op.outputs[0].consumers if len(op.outputs) == 1 else []
    return users[0] if len(users) == 1 and users[0].type in types else None


def _params_1d(pool) -> dict | None:
    p = pool.params
    if pool.type == "torch.mean":  # adaptive_avg_pool1d(1) decomposes to a keepdim mean over (H, W)
        dims = sorted(d % 4 for d in (p.get("dim") or []))
        return {"output_size": [1]} if dims == [2, 3] and p.get("keepdim") else None
    if pool.type.startswith("F.adaptive"):
        size = p["output_size"]
        return {"output_size": [size[1]]} if size[0] == 1 else None
    first = [p["kernel_size"][0], p["stride"][0], p["padding"][0]] + list(p.get("dilation", [1])[:1])
    if first[:3] != [1, 1, 0] or first[3:] not in ([], [1]):
        return None
    out = {k: [v[1]] for k, v in p.items() if k in ("kernel_size", "stride", "padding", "dilation")}
    out.update({k: v for k, v in p.items() if k not in out})
    return out


@graph_pass("fuse_pooling1d", "unsqueeze(-2) → 2-D pooling over 1×k → squeeze(-2) back to the 1-D pooling")
def run(graph, cx):
    for unsq in list(graph.ops):
        if unsq.type != "torch.unsqueeze" or unsq not in graph.ops or len(unsq.inputs[0].shape or []) != 3:
            continue
        if _dim(unsq.params["dim"], 4) != 2:
            continue
        pool = _sole_reader(unsq, _POOLS)
        sq = _sole_reader(pool, ("torch.squeeze",)) if pool is not None else None
        if sq is None or _dim(sq.params["dim"], 4) != 2:
            continue
        params = _params_1d(pool)
        if params is not None:
            kind = "F.adaptive_avg_pool1d" if pool.type == "torch.mean" else pool.type.replace("2d", "1d")
            replace_chain(graph, sq, [unsq, pool], kind, [unsq.inputs[0]], params=params)
