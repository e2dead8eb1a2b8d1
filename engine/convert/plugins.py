"""Loading user converter plug-ins.

A plug-in is an ordinary Python file that imports the decorators from :mod:`engine.convert`
and registers rules::

    from engine.convert import aten_converter

    @aten_converter("aten.relu.default")
    def relu_as_clip(ctx, op):
        return ctx.emit("F.hardtanh", [op.inputs[0]], params={"min_val": 0.0, "max_val": 1e9})

``--converters`` takes files or folders (every ``*.py`` of a folder, by name). A plug-in that
fails to load — a syntax error, an exception while it runs — is one :class:`PluginError` naming
its file and line; one whose validator or rule fails while converting leaves that node
unconverted with a diagnostic naming the rule, its file and line (``Diagnostic.plugin``).

A plug-in may also declare its own ncnn layer types (:func:`engine.convert.ncnn_custom_layer`),
which its ncnn rules then emit: they are written as custom layers with their params and weights,
and the declared Python function computes them when the model is verified. An ncnn rule
emitting a type that is neither built in nor declared is refused while converting.

Rules registered while a plug-in file runs are tagged ``plugin:<file>`` and default to
``Priority.HIGH``, so they are tried before built-ins. :func:`plugin_scope` loads plug-ins for
one conversion and restores the registries afterwards (the GUI converts many times in one
process; one scope at a time). :func:`nodes_by_rule` says which ATen nodes each rule converted
(from the operators' ``meta["converted_by"]``). A plug-in is the user's own code and runs with
their rights, like any script they run; it is never read from a model file.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import PluginError
from ..ir import Graph
from . import layout, registry

#: the registries are global: one plug-in scope at a time (a GUI converts in worker threads)
_SCOPE_LOCK = threading.RLock()


def plugin_files(paths: Iterable[str | Path]) -> list[Path]:
    """The plug-in files named by ``paths``: a file as is, a folder as every ``*.py`` in it
    (sorted by name; other files and sub-folders are ignored). A missing path is an error."""
    files: list[Path] = []
    for entry in paths:
        p = Path(entry)
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.suffix == ".py" and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise PluginError(str(p), "converter plug-in file or folder not found")
    return files


def line_in(path: str | Path, tb) -> int | None:
    """The line of the innermost frame of traceback ``tb`` that runs the file ``path``."""
    target = os.path.realpath(path)
    line = None
    for frame, lineno in traceback.walk_tb(tb):
        if os.path.realpath(frame.f_code.co_filename) == target:
            line = lineno
    return line


def load_plugin(path: str | Path) -> list[registry.Converter]:
    """Execute a plug-in file; returns the rules it registered. Errors become PluginError
    naming the file and, when known, the line."""
    p = Path(path)
    if not p.is_file():
        raise PluginError(str(p), "converter plug-in file not found")
    before = {id(c) for reg in (registry.ATEN, registry.NCNN) for lst in reg.snapshot().values() for c in lst}
    mod_name = f"pt2ncnn_plugin_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise PluginError(str(p), "not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    registry._current_origin.append((f"plugin:{p}", registry.Priority.HIGH))
    try:
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    except SyntaxError as e:
        raise PluginError(str(p), f"syntax error: {e.msg}", e.lineno) from e
    except registry.RegistryError as e:
        raise PluginError(str(p), str(e), line_in(p, e.__traceback__)) from e
    except Exception as e:
        raise PluginError(str(p), f"{type(e).__name__} while loading the plug-in: {e}",
                          line_in(p, e.__traceback__)) from e
    finally:
        registry._current_origin.pop()
        sys.modules.pop(mod_name, None)
    return [c for reg in (registry.ATEN, registry.NCNN) for lst in reg.snapshot().values() for c in lst
            if id(c) not in before]


@contextlib.contextmanager
def plugin_scope(paths: Iterable[str | Path]) -> Iterator[list[registry.Converter]]:
    """Load plug-ins (files, or folders of them: :func:`plugin_files`) for the duration of a
    ``with`` block, then restore the registries (rules, custom layers, layout rules). The
    built-in rules are registered first: registered inside the scope (their package imported
    there for the first time), the restore would drop them for the rest of the process."""
    from .. import converters  # noqa: F401  (registers the built-in rules)

    with _SCOPE_LOCK:
        snaps = (registry.ATEN.snapshot(), registry.NCNN.snapshot(), registry.CUSTOM.snapshot(), dict(layout._RULES))
        try:
            loaded: list[registry.Converter] = []
            for p in plugin_files(paths):
                loaded += load_plugin(p)
            yield loaded
        finally:
            registry.ATEN.restore(snaps[0])
            registry.NCNN.restore(snaps[1])
            registry.CUSTOM.restore(snaps[2])
            layout._RULES.clear()
            layout._RULES.update(snaps[3])


def nodes_by_rule(*graphs: Graph | None) -> dict[str, list[str]]:
    """Rule tag (:attr:`registry.Converter.tag`) → the ATen nodes whose operators in ``graphs``
    (a conversion's pnnx and ncnn graphs) it made, in first-seen order."""
    out: dict[str, dict[str, None]] = {}
    for g in graphs:
        for op in g.ops if g is not None else ():
            for tag in op.meta.get("converted_by", ()):
                out.setdefault(tag, {}).update(dict.fromkeys(op.provenance.nodes))
    return {tag: list(nodes) for tag, nodes in out.items()}
