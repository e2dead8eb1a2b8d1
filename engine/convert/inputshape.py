"""User-given input shapes (``--inputshape`` / ``inputshape=[1,3,224,224]``): bind the
symbols of the user inputs to concrete values so shapes that must be concrete can be
computed; dims stay symbolic where ncnn can keep them dynamic."""
from __future__ import annotations

from typing import Sequence

from ..errors import PT2Error
from ..ir import Graph


class InputShapeError(PT2Error):
    pass


def parse_inputshape(text: str) -> list[list[int]]:
    """``"[1,3,224,224],[1,10]"`` → ``[[1,3,224,224],[1,10]]``."""
    import re

    groups = re.findall(r"\[([^\]]*)\]", text.replace(" ", ""))
    if not groups:
        raise InputShapeError(f"inputshape {text!r}: expected e.g. [1,3,224,224] or [1,3,224,224],[1,10]")
    try:
        return [[int(x) for x in g.split(",") if x] for g in groups]
    except ValueError:
        raise InputShapeError(f"inputshape {text!r}: dims must be integers") from None


def apply_input_shapes(graph: Graph, shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """Check ``shapes`` against the user inputs and return the symbol bindings; concrete
    values are recorded in ``graph.meta["symbol_values"]`` for passes that need them."""
    inputs = graph.input_ops()
    if len(shapes) > len(inputs):
        raise InputShapeError(f"inputshape gives {len(shapes)} shapes but the model has {len(inputs)} inputs")
    bindings: dict[str, int] = dict(graph.meta.get("symbol_values", {}))
    for op, shape in zip(inputs, shapes):
        opd = op.outputs[0]
        if opd.shape is None:
            continue
        if len(shape) != len(opd.shape):
            raise InputShapeError(f"inputshape for {opd.name}: rank {len(shape)}, model input has rank {len(opd.shape)} "
                                  f"{opd.shape}")
        for d, v in zip(opd.shape, shape):
            if isinstance(d, int) and d != v:
                raise InputShapeError(f"inputshape for {opd.name}: dim {d} is static, got {v}")
            if isinstance(d, str):
                if bindings.get(d, v) != v:
                    raise InputShapeError(f"inputshape binds {d} to both {bindings[d]} and {v}")
                bindings[d] = v
    sym_ranges = graph.meta.get("symbols", {})  # name -> {"min", "max", "hint"} (engine.build)
    for name, v in bindings.items():
        info = sym_ranges.get(name) or {}
        lo, hi = info.get("min"), info.get("max")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise InputShapeError(f"inputshape sets {name}={v}, outside its exported range [{lo}, {hi}]")
    graph.meta["symbol_values"] = bindings
    return bindings
