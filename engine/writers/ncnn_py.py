"""Write ``<stem>_ncnn.py``: a ready script running the ncnn model with the ncnn Python runtime,
as pnnx's ``ncnnpy=`` output (``tools/pnnx/src/save_ncnn.cpp``) is.

``test_inference()`` makes the same seeded random inputs as the ``_pnnx.py``'s ``make_inputs()``
(PyTorch's shapes and dtypes), feeds each model input ``inK`` as ``ncnn.Mat(array,
batch_index=b)`` — int32 when it holds token ids for an ``Embed`` layer, float32 otherwise —
where ``b`` is the PyTorch axis the converter made the batch axis of that input
(233: none; read from the final ncnn graph through :func:`engine.convert.shapes.batch_dim`, never
assumed to be dim 0), extracts every output ``outK`` with ``mat.numpy(batch_index=b)`` for its own
batch axis, and returns torch tensors of PyTorch's shapes (dynamic dims computed from the
inputs' sizes) and dtypes, in the original output structure. It runs exactly (fp32 storage
and arithmetic) unless asked for ncnn's defaults.
"""
from __future__ import annotations

import logging
import os

from ..convert.shapes import batch_dim
from ..ir import Graph, Operand
from ..ir.vocab import is_ncnn
from .atomic import atomic_files
from .pnnx_py import _stem, path_code
from .py_expr import SymbolCode
from .py_signature import signature_of
from .py_source import TORCH_DTYPES, literal, sequence

log = logging.getLogger(__name__)

#: ncnn's "no batch axis" for ``Mat(batch_index=)`` / ``numpy(batch_index=)``
NO_BATCH = 233

#: layers that read their input as int32 (token ids), and layers that move data without reading it
_INT_READERS = ("Embed",)
_DATA_MOVERS = ("Split", "Reshape", "Flatten", "Permute", "Crop", "Squeeze", "ExpandDims", "Slice", "Tile", "Concat")

_HELPERS = '''def to_mat(value, batch_index, dtype=np.float32):
    """A model input as an ncnn Mat of dtype (float32; int32 for token ids), with axis
    batch_index (233: none) as the batch."""
    if isinstance(value, torch.Tensor):
        value = value.detach().double().numpy()  # any dtype (bfloat16, bool...) numpy can take
    a = np.ascontiguousarray(np.asarray(value), dtype=dtype)
    if a.ndim == 0:
        a = a.reshape(1)
    return ncnn.Mat(a, batch_index=batch_index).clone()  # cloned: in-place layers write to inputs


def from_mat(mat, batch_index, shape, dtype):
    """An ncnn output as a torch tensor of PyTorch's shape and dtype."""
    a = np.array(mat.numpy(batch_index=batch_index))
    if shape is not None:
        a = a.reshape(shape)
    t = torch.from_numpy(a)
    return t.round().to(dtype) if not dtype.is_floating_point and dtype != torch.bool else t.to(dtype)
'''


def _batch_index(spec: dict | None, opd: Operand | None) -> int:
    """The batch axis to feed/read a model input or output along: the one the conversion recorded
    for it (``graph.meta["inputs"/"outputs"]``: an output's own view, which may read its blob with
    the batch elsewhere than the blob's producer holds it), else the operand's."""
    if spec is not None and "batch_dim" in spec:
        b = spec["batch_dim"]
    else:
        b = batch_dim(opd) if opd is not None else None
    return NO_BATCH if b is None else b


def reads_ints(opd: Operand) -> bool:
    """Whether a layer reading int32 data (``Embed``) is fed from ``opd``, directly or through
    layers that only move data."""
    seen, todo = set(), [opd]
    while todo:
        o = todo.pop()
        for c in o.consumers:
            if c.type in _INT_READERS:
                return True
            if c.type in _DATA_MOVERS and id(c) not in seen:
                seen.add(id(c))
                todo += c.outputs
    return False


def custom_layers(graph: Graph) -> list[str]:
    """The types of layers the ncnn runtime does not have (unconverted operators written as
    custom layers by a partial conversion)."""
    return sorted({op.type for op in graph.ops if op.meta.get("custom_layer") or not is_ncnn(op)})


def ncnn_python(ncnn_graph: Graph, pnnx_graph: Graph | None, *, param_path, bin_path, py_path,
                program_signature=None, source: str | None = None) -> str:
    """The ``_ncnn.py`` source (see the module docstring)."""
    sig = signature_of(pnnx_graph if pnnx_graph is not None else ncnn_graph, program_signature)
    var = lambda o: sig.vars.get(id(o)) or sig.names(("value", id(o)), "v_" + o.name)  # noqa: E731
    blobs = {m["name"]: m["blob"] for m in ncnn_graph.meta.get("inputs", [])}
    #: what the conversion recorded per input blob: the Mat element type (int32: token ids), batch axis
    in_specs = {m["blob"]: m for m in ncnn_graph.meta.get("inputs", [])}
    symbols = SymbolCode([(o, var(o)) for o in sig.inputs], size="{var}.shape[{dim}]", minmax=("max", "min"))
    feeds = []
    for o in sig.inputs:
        blob = blobs.get(o.producer.name if o.producer is not None else o.name, blobs.get(o.name))
        if blob is not None and blob in ncnn_graph.operands:
            opd = ncnn_graph.operands[blob]
            spec = in_specs.get(blob)
            recorded = spec.get("dtype") if spec is not None else None
            ints = ", np.int32" if recorded == "int32" or recorded is None and reads_ints(opd) else ""
            feeds.append(f"ex.input({blob!r}, to_mat({var(o)}, {_batch_index(spec, opd)}{ints}))")
    out_specs = list(ncnn_graph.meta.get("outputs", []))
    outs = [m["blob"] for m in out_specs]
    produced = [o for o in sig.outputs if o is not None]
    extracts, leaves = [], []
    if len(outs) == len(produced):
        it = iter(out_specs)
        for k, (o, value) in enumerate(zip(sig.outputs, sig.output_values)):
            if o is None:
                leaves.append(literal(value))
                continue
            spec = next(it)
            blob = spec["blob"]
            opd = ncnn_graph.operands.get(blob)
            dims = symbols.dims(list(o.shape), minus_one=True) if o.shape is not None else None
            shape = sequence(dims, False) if dims is not None else "None"
            dtype = TORCH_DTYPES.get(o.dtype or "f32", "torch.float32")
            extracts += [f"ret, mat = ex.extract({blob!r})",
                         f"assert ret == 0, 'ncnn could not compute {blob} (error %d)' % ret",
                         f"out{k} = from_mat(mat, {_batch_index(spec, opd)}, {shape}, {dtype})"]
            leaves.append(f"out{k}")
        result = sig.return_expr(leaves) if leaves else "None"
    else:  # the outputs do not line up with the program's: return what ncnn has, flat
        for k, spec in enumerate(out_specs):
            blob = spec["blob"]
            opd = ncnn_graph.operands.get(blob)
            extracts += [f"ret, mat = ex.extract({blob!r})",
                         f"assert ret == 0, 'ncnn could not compute {blob} (error %d)' % ret",
                         f"out{k} = torch.from_numpy(np.array(mat.numpy(batch_index={_batch_index(spec, opd)})))"]
        result = sequence([f"out{k}" for k in range(len(outs))], False)
    custom = custom_layers(ncnn_graph)
    stem = _stem(py_path)
    origin = f" of {source}" if source else ""
    note = ([f"The model has custom layers ({', '.join(custom)}): register them with",
             "net.register_custom_layer() before load_param, or the runtime refuses the model."] if custom else [])
    lines = [
        f'"""{stem}: run the ncnn model{origin} with the ncnn Python runtime (written by pt2ncnn).',
        "",
        "test_inference() feeds the same seeded random inputs as the _pnnx.py's make_inputs() and",
        "returns the outputs with PyTorch's shapes, dtypes and structure.",
        *note,
        '"""',
        "import os",
        "",
        "import ncnn",
        "import numpy as np",
        "import torch",
        "",
        "HERE = os.path.dirname(os.path.abspath(__file__))",
        f"NCNN_PARAM = {path_code(param_path, py_path)}",
        f"NCNN_BIN = {path_code(bin_path, py_path)}",
        "", "",
        _HELPERS,
        "",
        "def make_inputs():",
        '    """Seeded random inputs of PyTorch\'s shapes and dtypes, one per model input."""',
        *("    " + ln for ln in sig.input_lines(var)),
        f"    return [{', '.join(var(o) for o in sig.inputs)}]",
        "", "",
        "def run(inputs, exact=True):",
        '    """Run the ncnn model on make_inputs()-style inputs. exact: fp32 storage and arithmetic',
        '    like PyTorch (False: ncnn\'s defaults, fp16 where the CPU has it)."""',
        f"    {', '.join(var(o) for o in sig.inputs) + (',' if len(sig.inputs) == 1 else '')} = inputs"
        if sig.inputs else "    del inputs",
        "    with ncnn.Net() as net:",
        "        if exact:",
        "            net.opt.use_fp16_storage = net.opt.use_fp16_arithmetic = net.opt.use_fp16_packed = False",
        "            net.opt.use_bf16_storage = False",
        "        assert net.load_param(NCNN_PARAM) == 0, 'ncnn refused ' + NCNN_PARAM",
        "        assert net.load_model(NCNN_BIN) == 0, 'ncnn refused ' + NCNN_BIN",
        "        with net.create_extractor() as ex:",
        *("            " + ln for ln in feeds + extracts),
        f"    return {result}",
        "", "",
        "def test_inference(exact=True):",
        '    """The ncnn model run on make_inputs()."""',
        "    return run(make_inputs(), exact)",
        "", "",
        "if __name__ == '__main__':",
        "    print(test_inference())",
    ]
    return "\n".join(lines) + "\n"


def write_ncnn_py(ncnn_graph: Graph, pnnx_graph: Graph | None, py_path, param_path, bin_path, *,
                  program_signature=None, source: str | None = None) -> None:
    """Write ``py_path`` atomically (inside an ``atomic_transaction``: with the other files)."""
    text = ncnn_python(ncnn_graph, pnnx_graph, param_path=param_path, bin_path=bin_path, py_path=py_path,
                       program_signature=program_signature, source=source).encode("utf-8")
    with atomic_files([py_path]) as (f,):
        f.write(text)
    log.info("wrote %s", os.fspath(py_path))
