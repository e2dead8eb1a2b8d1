"""Building small ncnn-vocabulary IR graphs by hand, writing them and running them in the real
ncnn runtime (shared by the writer and layer-table tests)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from engine.ir import Attribute, Graph, Operand
from engine.ncnn.layers import make_params
from engine.writers import write_ncnn


class NetBuilder:
    """``b.input("in0", (c, h, w))``, ``b.layer("ReLU", [x])``... then ``b.write(dir)``."""

    def __init__(self) -> None:
        self.g = Graph()

    def input(self, name: str, shape: Sequence[int]) -> Operand:
        dims = dict(zip(("w", "h", "c"), reversed(list(shape))))
        if len(shape) == 4:
            dims = {"w": shape[3], "h": shape[2], "d": shape[1], "c": shape[0]}
        out = self.g.new_operand(name, exact=True, shape=list(shape))
        self.g.add_op("Input", name, [], [out], params=make_params("Input", **dims), exact=True)
        return out

    def layer(self, type_: str, inputs: Sequence[Operand], *, name: str | None = None, outputs: int | Sequence[str] = 1,
              weights: dict[str, Any] | None = None, raw_params: dict[int, Any] | None = None, **params: Any):
        name = name or self.g.unique_op_name(type_.lower())
        names = [name] if outputs == 1 else ([f"{name}_{k}" for k in range(outputs)] if isinstance(outputs, int)
                                              else list(outputs))
        outs = [self.g.new_operand(n) for n in names]
        attrs = {k: v if isinstance(v, Attribute) else Attribute(np.asarray(v)) for k, v in (weights or {}).items()}
        p = make_params(type_, **params) if raw_params is None else dict(raw_params)
        self.g.add_op(type_, name, list(inputs), outs, params=p, attrs=attrs, exact=True)
        return outs[0] if outputs == 1 else outs

    def write(self, folder: Path, *, fp16: bool = False, stem: str = "model") -> tuple[Path, Path]:
        param, bin_ = folder / f"{stem}.ncnn.param", folder / f"{stem}.ncnn.bin"
        write_ncnn(self.g, param, bin_, fp16=fp16)
        return param, bin_


from tests.ncnn_runtime import load_net, run  # noqa: E402,F401  (re-exported for the writer tests)


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """Max abs difference relative to the reference's max magnitude."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.size == want.size, f"shape {got.shape} vs {want.shape}"
    scale = max(float(np.abs(want).max()), 1e-6)
    return float(np.abs(got.reshape(want.shape) - want).max()) / scale
