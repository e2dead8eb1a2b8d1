"""Writing a conversion's files: the ncnn model and, optionally, the pnnx model and the two
Python scripts (``<stem>_pnnx.py``: the pnnx graph as a PyTorch module reading the ``.pnnx.bin``;
``<stem>_ncnn.py``: the ncnn model run by the ncnn runtime).

Each file is written to a temporary file in the target folder by :mod:`engine.writers`: the ncnn
model (validated first) and its script on one side, the pnnx model and its script on the other,
one side after the other or, when the weights are heavy, side by side on two threads
(:mod:`.parallel`). Only when all are complete are the files renamed over their targets (one
:func:`~engine.writers.atomic_transaction`). A failure or a cancel at any point leaves nothing
partial behind and every existing file as it was.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import WriteError
from ..ir import Graph
from .parallel import run_both, worth_parallel


def _pair(a, b, what: str) -> bool:
    if (a is None) != (b is None):
        raise WriteError(str(a or b), f"{what}: give both the .param and the .bin path")
    return a is not None


def with_custom_layers(graph: Graph) -> Graph:
    """A copy of ``graph`` where every unconverted operator becomes a parameterless custom
    layer named after its op (``aten.grid_sampler_2d.default`` → type ``aten_grid_sampler_2d``),
    for ``--partial`` output: users can register their own ncnn layer under that type."""
    from ..ir.vocab import is_ncnn

    g = graph.copy()
    for op in g.ops:
        if not is_ncnn(op):
            base = op.type.rsplit(".", 1)[0] if op.type.count(".") >= 2 else op.type
            op.type = base.replace(".", "_")
            op.params, op.attrs = {}, {}
            op.meta["custom_layer"] = True
    return g


def _cancel_check(cancel: Callable[[], bool] | None):
    """A writer ``progress`` callback that stops the write once ``cancel()`` is true."""
    if cancel is None:
        return None
    from ..passes.manager import Cancelled

    def progress(done: int, total: int) -> None:
        if cancel():
            raise Cancelled("export cancelled; no file written")

    return progress


def script_path(param: str | Path, kind: str) -> Path:
    """The default script of a model: ``dir/m.<kind>.param`` → ``dir/m_<kind>.py`` (``kind``:
    ``pnnx`` or ``ncnn``)."""
    p = Path(param)
    name = p.name
    for suffix in (f".{kind}.param", ".param"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return p.with_name(f"{name}_{kind}.py")


def _script_needs(script, model_path, what: str) -> None:
    if script is not None and model_path is None:
        raise WriteError(str(script), f"the script runs the {what}, which this export does not write")


def write_files(*, ncnn_graph: Graph, pnnx_graph: Graph | None, ncnn_param=None, ncnn_bin=None,
                pnnx_param=None, pnnx_bin=None, pnnx_py=None, ncnn_py=None, fp16: bool = True,
                partial: bool = False, cancel: Callable[[], bool] | None = None, warn=None,
                program_signature=None, source: str | None = None) -> list[Path]:
    """Write the requested files (see the module docstring); ``warn(operator, reason)`` hears
    about ncnn weights holding NaN or infinite values. ``program_signature`` (the source
    program's) gives the scripts the original input/output structure; ``source`` names the
    model in their docstrings."""
    from ..writers import atomic_transaction, write_ncnn, write_ncnn_py, write_pnnx, write_pnnx_py

    _script_needs(pnnx_py, pnnx_bin, "pnnx model (.pnnx.bin)")
    _script_needs(ncnn_py, ncnn_param, "ncnn model (.ncnn.param/.ncnn.bin)")
    if pnnx_py is not None and pnnx_graph is None:
        raise WriteError(str(pnnx_py), "this conversion kept no pnnx-level graph")
    if partial:
        ncnn_graph = with_custom_layers(ncnn_graph)
    ncnn_model = _pair(ncnn_param, ncnn_bin, "ncnn model")
    pnnx_model = _pair(pnnx_param, pnnx_bin, "pnnx model")
    if pnnx_model and pnnx_graph is None:
        raise WriteError(str(pnnx_param), "this conversion kept no pnnx-level graph")

    def ncnn_side(progress) -> None:
        if ncnn_model:
            write_ncnn(ncnn_graph, ncnn_param, ncnn_bin, fp16=fp16, progress=progress, warn=warn)
        if ncnn_py is not None:
            write_ncnn_py(ncnn_graph, pnnx_graph, ncnn_py, ncnn_param, ncnn_bin, program_signature=program_signature,
                          source=source)

    def pnnx_side(progress) -> None:
        if pnnx_model:
            write_pnnx(pnnx_graph, pnnx_param, pnnx_bin, progress=progress)
        if pnnx_py is not None:
            write_pnnx_py(pnnx_graph, pnnx_py, pnnx_bin, program_signature=program_signature, source=source)

    progress = _cancel_check(cancel)
    with atomic_transaction():
        if ncnn_model and pnnx_model and worth_parallel(ncnn_graph):
            run_both(ncnn_side, pnnx_side, progress)
        else:
            ncnn_side(progress)
            pnnx_side(progress)
        if progress is not None:
            progress(1, 1)
    written = [Path(p) for p, wanted in ((ncnn_param, ncnn_model), (ncnn_bin, ncnn_model), (pnnx_param, pnnx_model),
                                         (pnnx_bin, pnnx_model), (pnnx_py, True), (ncnn_py, True))
               if wanted and p is not None]
    return written
