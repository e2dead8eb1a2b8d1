"""Loading user converter plug-ins.

A plug-in is an ordinary Python file that imports the decorators from :mod:`engine.convert`
and registers rules::

    from engine.convert import aten_converter

    @aten_converter("aten.relu.default")
    def relu_as_clip(ctx, op):
        return ctx.emit("F.hardtanh", [op.inputs[0]], params={"min_val": 0.0, "max_val": 1e9})

A plug-in may also declare its own ncnn layer types (:func:`engine.convert.ncnn_custom_layer`),
which its ncnn rules then emit: they are written as custom layers with their params and weights,
and the declared Python function computes them when the model is verified. An ncnn rule
emitting a type that is neither built in nor declared is refused while converting.

Rules registered while a plug-in file runs are tagged ``plugin:<file>`` and default to
``Priority.HIGH``, so they are tried before built-ins. :func:`plugin_scope` loads plug-ins for
one conversion and restores the registries afterwards (the GUI converts many times in one
process). A plug-in is the user's own code and runs with their rights, like any script they
run; it is never read from a model file.
"""
from __future__ import annotations

import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Iterable, Iterator

from ..errors import PluginError
from . import registry


def load_plugin(path: str | Path) -> list[registry.Converter]:
    """Execute a plug-in file; returns the rules it registered. Errors become PluginError."""
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
    except registry.RegistryError as e:
        raise PluginError(str(p), str(e)) from e
    except SyntaxError as e:
        raise PluginError(str(p), f"syntax error at line {e.lineno}: {e.msg}") from e
    except Exception as e:
        raise PluginError(str(p), f"{type(e).__name__}: {e}") from e
    finally:
        registry._current_origin.pop()
        sys.modules.pop(mod_name, None)
    return [c for reg in (registry.ATEN, registry.NCNN) for lst in reg.snapshot().values() for c in lst
            if id(c) not in before]


@contextlib.contextmanager
def plugin_scope(paths: Iterable[str | Path]) -> Iterator[list[registry.Converter]]:
    """Load plug-ins for the duration of a ``with`` block, then restore the registries."""
    snaps = (registry.ATEN.snapshot(), registry.NCNN.snapshot(), registry.CUSTOM.snapshot())
    try:
        loaded: list[registry.Converter] = []
        for p in paths:
            loaded += load_plugin(p)
        yield loaded
    finally:
        registry.ATEN.restore(snaps[0])
        registry.NCNN.restore(snaps[1])
        registry.CUSTOM.restore(snaps[2])
