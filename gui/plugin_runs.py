"""The work behind Studio's converter plug-ins, run in worker threads (no Qt here).

* :func:`convert_with_plugins` — a conversion that first loads each plug-in file on its own
  (:func:`load_report`): when one does not load, nothing is converted and a
  :class:`PluginFailure` says which file and line (the window keeps its previous conversion);
  otherwise the :class:`gui.document.Conversion`, with what each file registered;
* :func:`write_plugin_file` — ``engine.convert.scaffold`` for one node, written atomically;
* :func:`check_rule` — Verify for the layers a rule made (their error alone, fed PyTorch's
  values), as a :class:`RuleCheck`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from engine.convert import registry
from engine.convert.plugins import plugin_files, plugin_scope
from engine.convert.scaffold import scaffold, write_plugin
from engine.diagnostics import Diagnostic
from engine.errors import PluginError
from engine.verify.result import BLAMED

from .document import Conversion, convert_document


@dataclass(frozen=True)
class RuleInfo:
    """One rule a plug-in file registers."""

    tag: str  #: :attr:`engine.convert.registry.Converter.tag` (what the operators it made carry)
    function: str
    target: str  #: the overload (ATen rules) or pnnx op type (ncnn rules)
    priority: int
    step: str  #: ``aten`` (ATen → pnnx) or ``ncnn`` (pnnx → ncnn)
    where: str  #: ``file:line`` of the function


@dataclass
class PluginLoad:
    """One plug-in file as loaded: its rules, or why it did not load."""

    path: str
    rules: list[RuleInfo] = field(default_factory=list)
    error: PluginError | None = None


def load_diagnostic(error: PluginError) -> Diagnostic:
    """The Problems row of a plug-in file that does not load."""
    return Diagnostic(node="", op=f"plug-in {os.path.basename(error.path)}", reason=error.reason,
                      source=error.where, stage="load plug-in", plugin=error.where)


@dataclass
class PluginFailure:
    """A conversion not run because a plug-in file did not load."""

    loads: list[PluginLoad]

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return [load_diagnostic(ld.error) for ld in self.loads if ld.error is not None]


def _rules(convs: Sequence[registry.Converter]) -> list[RuleInfo]:
    out = []
    for c in convs:
        step = "aten" if any(x is c for x in registry.ATEN.candidates(c.target)) else "ncnn"
        out.append(RuleInfo(c.tag, c.fn.__qualname__, c.target, c.priority, step, c.location()))
    return out


def load_report(paths: Sequence[str]) -> list[PluginLoad]:
    """Load each plug-in file (folders: their ``*.py``) on its own, registries restored after."""
    out: list[PluginLoad] = []
    for entry in paths:
        try:
            files = [str(p) for p in plugin_files([entry])]
        except PluginError as e:
            out.append(PluginLoad(str(entry), error=e))
            continue
        for f in files:
            try:
                with plugin_scope([f]) as convs:
                    out.append(PluginLoad(f, _rules(convs)))
            except PluginError as e:
                out.append(PluginLoad(f, error=e))
    return out


def convert_with_plugins(ctx, doc, options, *, wait_for_preview: float = 0.0) -> Conversion | PluginFailure:
    """Convert ``doc`` (worker thread) unless one of ``options.converters`` does not load
    (``wait_for_preview``: see :func:`gui.document.convert_document`)."""
    loads = load_report([str(p) for p in options.converters])
    if any(ld.error is not None for ld in loads):
        return PluginFailure(loads)
    conv = convert_document(ctx, doc, options, wait_for_preview=wait_for_preview)
    conv.plugins = loads
    return conv


def write_plugin_file(ctx, op_name: str, node: Any, template: str, model: str | None, path: str) -> str:
    """Scaffold a plug-in for ``node`` with ``template`` and write it (never over a file)."""
    ctx.progress(0, 1, f"writing a {template} converter for {op_name}")
    text = scaffold(op_name, node=node, template=template, model=model)
    return str(write_plugin(path, text))


def free_path(folder: str, name: str) -> str:
    """``folder/name``, or ``folder/<stem>_2.py``... when it exists."""
    stem, ext = os.path.splitext(name)
    path, k = os.path.join(folder, name), 2
    while os.path.exists(path):
        path, k = os.path.join(folder, f"{stem}_{k}{ext}"), k + 1
    return path


@dataclass
class RuleCheck:
    """Verify's verdict on the layers one rule made: each run alone on PyTorch's inputs."""

    tag: str
    layers: list[Any]  #: the LayerRecords (compared ones)
    rtol: float
    conversion: Any  #: the Conversion checked
    made: int = 0  #: how many ncnn layers the rule made (intermediate ones are checked with the next)

    @property
    def worst(self) -> float | None:
        values = [r.own.max_rel for r in self.layers if r.own is not None]
        return max(values) if values else None

    @property
    def ok(self) -> bool:
        return bool(self.layers) and not any(r.status in BLAMED for r in self.layers)

    def describe(self) -> str:
        if not self.layers:
            return "no layer of it could be compared with PyTorch"
        n = len(self.layers)
        worst = self.worst
        err = "no error measured" if worst is None else f"max rel. error {worst:.2g}"
        verdict = "within" if self.ok else "beyond"
        of = f" of {self.made}" if self.made > n else ""
        return f"{err} alone ({n}{of} layer{'s' if n != 1 or of else ''} compared, {verdict} tolerance {self.rtol:g})"


def check_rule(ctx, doc, conversion: Conversion, tag: str, nodes: Sequence[str]) -> RuleCheck:
    """Verify the conversion and keep the layers made from ``nodes`` by rule ``tag``."""
    from .verify_model import verify_conversion

    run = verify_conversion(ctx, doc, conversion)
    made = {op.name for op in conversion.result.ncnn.ops if tag in op.meta.get("converted_by", ())}
    layers = [r for r in run.layers_of_nodes(nodes) if (r.layer in made or not made) and r.own is not None]
    return RuleCheck(tag, layers, run.tolerance, conversion, len(made))
