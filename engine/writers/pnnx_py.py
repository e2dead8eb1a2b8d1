"""Write ``<stem>_pnnx.py``: the pnnx-level graph as a readable, runnable PyTorch module, as pnnx's
``pnnxpy=`` output (``tools/pnnx/src/ir.cpp`` ``Graph::python``) is.

The file imports only torch and numpy (and the standard library). It holds:

* ``class Model(nn.Module)`` — ``nn.*`` submodules built with the operators' params, weights
  and buffers read from ``<stem>.pnnx.bin`` with their stored dtypes (parameters stay
  parameters, buffers stay buffers, persistent or not), and a ``forward`` of one line per
  operator (:mod:`.pnnx_py_ops` and the modules it names), named after the graph:
  ``self.<operator>`` and ``v_<value>``, so every line leads back to its ATen nodes, and
  commented with its module path. ``forward`` takes the original call's arguments (tuples,
  lists and dicts rebuilt) and returns the original output structure (:mod:`.py_signature`).
* ``make_inputs()`` — seeded random example inputs (``(args, kwargs)``); ``test_inference()``;
* ``export_exported_program(example_inputs=None, path=None)`` — ``torch.export`` of the module,
  dynamic dims kept dynamic with the source package's ranges, saved as ``<stem>_pnnx.pt2``
  (``pt2ncnn`` converts it again); ``export_torchscript()`` (``torch.jit.trace``, ``.pt``) and
  ``export_onnx()`` (TorchScript-based ``torch.onnx.export``, ``.onnx``).

Paths: the ``.pnnx.bin`` is found beside the script when it was written there (so the pair can
be moved together), else by its absolute path; ``Model(bin_path=...)`` overrides it.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

from ..ir import Graph, Operand
from . import pnnx_py_aten, pnnx_py_nn, pnnx_py_tensor  # noqa: F401  (register their emitters)
from .atomic import atomic_files
from .pnnx_py_ops import OpContext, OpSource, Weight, source_of
from .py_expr import SymbolCode
from .py_signature import PySignature, signature_of
from .py_source import FLOAT_DTYPES, MODULE_ATTRIBUTES, NUMPY_DTYPES, Names, literal

log = logging.getLogger(__name__)

_LOADER = '''def load_tensor(archive, key, shape, dtype):
    """A tensor of the .pnnx.bin: zip member <operator>.<attribute>, raw little-endian data."""
    data = archive.read(key)
    if dtype == 'bf16':
        return torch.from_numpy(np.frombuffer(data, '<i2').copy()).view(torch.bfloat16).reshape(shape)
    return torch.from_numpy(np.frombuffer(data, dtype).copy()).reshape(shape)
'''


def path_code(target: str | os.PathLike, script: str | os.PathLike) -> str:
    """Source naming ``target`` from a script at ``script``: relative to the script's folder
    when they share it, else absolute."""
    t, s = Path(os.path.abspath(os.fspath(target))), Path(os.path.abspath(os.fspath(script)))
    if t.parent == s.parent:
        return f"os.path.join(HERE, {t.name!r})"
    return repr(str(t))


def _stem(script: str | os.PathLike) -> str:
    name = Path(os.fspath(script)).name
    return name[:-3] if name.endswith(".py") else name


class _Writer:
    def __init__(self, graph: Graph, sig: PySignature):
        self.g = graph
        self.sig = sig
        self.names = sig.names
        self._vars = sig.vars
        self.attrs = Names(MODULE_ATTRIBUTES | {"load_tensor"})
        self._numbers: dict[int, bool] = {}
        self.symbols = SymbolCode([(o, sig.vars[id(o)]) for o in sig.inputs])

    def var(self, opd: Operand) -> str:
        v = self._vars.get(id(opd))
        if v is None:
            v = self._vars[id(opd)] = self.names(("value", id(opd)), "v_" + opd.name)
        return v

    def is_number(self, opd: Operand) -> bool:
        """A Python number at run time (a size, a SymInt input), not a tensor."""
        key = id(opd)
        if key not in self._numbers:
            p = opd.producer
            self._numbers[key] = opd.shape == [] and (
                "expr" in opd.meta or (p is not None and p.type in ("Tensor.size", "Tensor.numel"))
                or (p is not None and p.type == "pnnx.Expression" and bool(p.inputs)
                    and all(self.is_number(i) for i in p.inputs)))
        return self._numbers[key]

    def sources(self) -> list[tuple[object, OpSource]]:
        var, attrs, symbols, is_number, names = self.var, self.attrs, self.symbols, self.is_number, self.names
        return [(op, source_of(OpContext(op, var, attrs(op.name), symbols, is_number, names))) for op in self.g.ops]


def _weight_line(w: Weight) -> str:
    dtype = NUMPY_DTYPES.get(w.attr.dtype)
    if dtype is None:
        return f"raise NotImplementedError({f'{w.member}: {w.attr.dtype} tensors cannot be loaded'!r})"
    shape = w.shape if w.shape is not None else tuple(w.attr.shape)
    load = f"load_tensor(archive, {w.member!r}, {literal(tuple(shape))}, {dtype!r})"
    if w.kind == "parameter":
        grad = "" if w.attr.dtype in FLOAT_DTYPES else ", requires_grad=False"
        return f"{w.owner}.{w.name} = nn.Parameter({load}{grad})"
    if w.kind == "buffer" and w.owner == "self":
        return f"self.register_buffer({w.name!r}, {load}, persistent={w.persistent})"
    return f"{w.owner}.{w.name} = {load}"


def _indent(lines, n: int) -> list[str]:
    pad = " " * n
    return [pad + ln if ln else "" for ln in lines]


def pnnx_python(graph: Graph, *, bin_path: str | os.PathLike, py_path: str | os.PathLike,
                program_signature=None, source: str | None = None) -> str:
    """The ``_pnnx.py`` source for ``graph`` (see the module docstring)."""
    sig = signature_of(graph, program_signature)
    w = _Writer(graph, sig)
    sources = w.sources()
    init, weights, forward = [], [], list(sig.reads)
    for op, src in sources:
        init += src.init
        weights += src.weights
        if src.forward:
            module = next(filter(None, op.provenance.modules), None)
            forward.append(src.forward[0] + (f"  # {module}" if module else ""))
            forward += src.forward[1:]
    leaves = [w.var(o) if o is not None else literal(v) for o, v in zip(sig.outputs, sig.output_values)]
    forward.append(f"return {sig.return_expr(leaves)}" if leaves else "return None")
    return _file(sig, w, init, weights, forward, bin_path, py_path, source)


def _file(sig: PySignature, w: _Writer, init, weights, forward, bin_path, py_path, source) -> str:
    stem = _stem(py_path)
    origin = f" from {source}" if source else ""
    ins = "; ".join(f"{o.name} {o.dtype} {list(o.shape or [])}" for o in sig.inputs) or "none"
    positional = [p.name for p in sig.params if not p.keyword]
    args, kwargs = sig.call_args(w.var)
    head = [
        f'"""{stem}: the pnnx model{origin} as a PyTorch module (written by pt2ncnn).',
        "",
        f"Inputs: {ins}.",
        "Model() loads its weights from the .pnnx.bin; test_inference() runs it on random inputs;",
        "export_exported_program() saves a torch.export package (.pt2) that pt2ncnn converts again;",
        "export_torchscript() and export_onnx() export it the other ways pnnx offers.",
        '"""',
        "import os",
        "import operator",
        "import zipfile",
        "",
        "import numpy as np",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "HERE = os.path.dirname(os.path.abspath(__file__))",
        f"PNNX_BIN = {path_code(bin_path, py_path)}",
        f"OUTPUT_STEM = os.path.join(HERE, {stem!r})",
        "",
        "",
        _LOADER,
        "",
        "class Model(nn.Module):",
        "    def __init__(self, bin_path=PNNX_BIN):",
        "        super().__init__()",
    ]
    body = _indent(init, 8)
    if weights:
        body += ["", "        with zipfile.ZipFile(bin_path) as archive:"]
        body += _indent([_weight_line(x) for x in weights], 12)
    body += ["        self.eval()", "", "    " + sig.header()] + _indent(forward, 8)
    tail = [
        "", "",
        "def make_inputs():",
        '    """Seeded random inputs of the exported shapes and dtypes: (args, kwargs) of Model.forward."""',
        *_indent(sig.input_lines(w.var), 4),
        f"    return {args}, {kwargs}",
        "", "",
        "def dynamic_shapes():",
        '    """torch.export dynamic shapes: the dynamic dims of the source package, with its ranges."""',
        *_indent(sig.dim_lines(), 4),
        f"    return {sig.dynamic_shapes()}",
        "", "",
        "def export_exported_program(example_inputs=None, path=None, example_kwargs=None):",
        '    """torch.export the module (dynamic dims stay dynamic) and save it, by default as',
        f"    {stem}.pt2 beside this file. example_inputs: the positional arguments of forward",
        '    (default: make_inputs()). Returns the ExportedProgram."""',
        "    net = Model()",
        "    args, kwargs = make_inputs()",
        "    if example_inputs is not None:",
        "        args, kwargs = tuple(example_inputs), dict(example_kwargs or {})",
        "    ep = torch.export.export(net, args, kwargs, dynamic_shapes=dynamic_shapes())",
        "    torch.export.save(ep, path or OUTPUT_STEM + '.pt2')",
        "    return ep",
        "", "",
        "def export_torchscript(path=None):",
        f'    """torch.jit.trace the module and save it, by default as {stem}.pt beside this file."""',
        "    net = Model()",
        "    args, kwargs = make_inputs()",
        *([f"    kwargs.update(zip({literal(positional)}, args))",
           "    mod = torch.jit.trace(net, example_kwarg_inputs=kwargs, strict=False)"]
          if any(p.keyword for p in sig.params) else ["    mod = torch.jit.trace(net, args, strict=False)"]),
        "    mod.save(path or OUTPUT_STEM + '.pt')",
        "    return mod",
        "", "",
        "def export_onnx(path=None):",
        f'    """Export the module with the TorchScript-based torch.onnx exporter, by default as {stem}.onnx."""',
        "    net = Model()",
        "    args, kwargs = make_inputs()",
        "    torch.onnx.export(net, args, path or OUTPUT_STEM + '.onnx', kwargs=kwargs, dynamo=False,",
        f"                      input_names={literal([f'in{k}' for k in range(len(sig.inputs))])},",
        f"                      output_names={literal([f'out{k}' for k in range(len(sig.outputs))])},",
        f"                      dynamic_axes={_dynamic_axes(sig)})",
        "", "",
        "@torch.no_grad()",
        "def test_inference():",
        '    """The module run on make_inputs()."""',
        "    net = Model()",
        "    args, kwargs = make_inputs()",
        "    return net(*args, **kwargs)",
        "", "",
        "if __name__ == '__main__':",
        "    print(test_inference())",
    ]
    return "\n".join(head + body + tail) + "\n"


def _dynamic_axes(sig: PySignature) -> str:
    axes = {}
    for k, o in enumerate(sig.inputs):
        dims = {d: str(s) for d, s in enumerate(o.shape or []) if isinstance(s, str)}
        if dims:
            axes[f"in{k}"] = dims
    return literal(axes) if axes else "None"


def write_pnnx_py(graph: Graph, py_path: str | os.PathLike, bin_path: str | os.PathLike, *,
                  program_signature=None, source: str | None = None) -> None:
    """Write ``py_path`` atomically (inside an ``atomic_transaction``: with the other files)."""
    text = pnnx_python(graph, bin_path=bin_path, py_path=py_path, program_signature=program_signature,
                       source=source).encode("utf-8")
    with atomic_files([py_path]) as (f,):
        f.write(text)
    log.info("wrote %s", py_path)
