"""TEMPORARY: the agreed ``engine.load(path).model`` API over the reader pieces that exist
(``decode_program``), until ``engine.load`` lands. Tensors come from the torch state dict the
test passes in. Delete this file once ``engine.load`` exists."""
from __future__ import annotations

import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.reader.decode import decode_program
from engine.reader.schema import InputKind, SymExpr


@dataclass
class InputInfo:
    kind: InputKind
    name: str
    target: str | None
    persistent: bool | None
    meta: Any
    value: Any
    payload: Any = None


@dataclass
class OutputInfo:
    kind: Any
    name: str
    target: str | None
    meta: Any


@dataclass
class SymbolInfo:
    name: str
    min: int | None
    max: int | None
    hint: int | None


class _Signature:
    def __init__(self, program):
        tv = program.graph.tensor_values
        self.inputs = [InputInfo(s.kind, s.name, s.target, s.persistent, tv.get(s.name), s.value)
                       for s in program.signature.input_specs]
        self.outputs = [OutputInfo(s.kind, s.name, s.target, tv.get(s.name)) for s in program.signature.output_specs]
        hints = {}
        for m in tv.values():
            for d in m.sizes:
                if isinstance(d, SymExpr) and d.symbol:
                    hints[d.symbol] = d.hint
        self.symbols = {n: SymbolInfo(n, r.min_val, r.max_val, hints.get(n))
                        for n, r in program.range_constraints.items()}


class ShimProgram:
    def __init__(self, path, tensors: dict[str, np.ndarray]):
        with zipfile.ZipFile(path) as z:
            member = next(n for n in z.namelist() if "/models/" in n and n.endswith(".json"))
            self.program = decode_program(z.read(member), member)
        self.name = "model"
        self.graph = self.program.graph
        self.nodes = self.graph.nodes
        self.dialect = self.program.dialect
        self.signature = _Signature(self.program)
        self.range_constraints = self.program.range_constraints
        self._tensors = tensors
        self.reads: list[str] = []

    def tensor(self, name: str) -> np.ndarray:
        self.reads.append(name)
        return self._tensors[name]


def load_model(path, module=None):
    try:
        import engine

        if hasattr(engine, "load"):
            return engine.load(path).model
    except ImportError:
        pass
    tensors = {}
    if module is not None:
        tensors = {k: v.detach().numpy() for k, v in module.state_dict(keep_vars=False).items()}
        for k, v in vars(module).items():
            if hasattr(v, "detach"):
                tensors[k] = v.detach().numpy()
    return ShimProgram(path, tensors)
