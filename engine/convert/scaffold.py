"""Writing a converter plug-in for one ATen overload (``pt2ncnn scaffold``, Studio's "Write a
converter…").

:func:`scaffold` returns the source of a plug-in file for an overload (``aten.logit.default``):
a docstring with the overload's schema from the shipped table and — given a node of a loaded
model (an ATen-level :class:`~engine.ir.Operator`) — its argument values, tensor shapes and
dtypes and source line; a validator prefilled with what that node had; and a rule for one of
:data:`TEMPLATES`:

* ``pnnx`` — lower to existing pnnx ops with ``ctx.emit`` (a body to write: until then it
  refuses the node with a "write me" reason naming the file);
* ``ncnn_custom`` — one ncnn custom layer of your own (``@ncnn_custom_layer``), its params the
  node's scalar arguments, with a reference function ``pt2ncnn verify`` runs for it;
* ``decompose`` — the ATen ops of PyTorch's decomposition of the overload, traced at scaffold
  time for the node's arguments (:mod:`engine.convert.decomposition`, which imports torch) and
  written out as ``ctx.aten(...)`` lines, each then converted by the built-in rules.

The file loads with :func:`engine.convert.plugins.load_plugin` as written and registers a rule
for exactly that overload. This module does not import torch (only the ``decompose`` template
does, lazily).
"""
from __future__ import annotations

import json
import keyword
import math
import os
import re
import textwrap
from pathlib import Path
from typing import Any, Iterable

from ..build import schemas
from ..errors import ScaffoldError
from ..ir import Graph, Operand, Operator

TEMPLATES = ("pnnx", "ncnn_custom", "decompose")


# ----------------------------------------------------------------------------- names
def _identifier(name: str, taken: Iterable[str] = ()) -> str:
    """A Python variable name for argument ``name`` (``self`` reads as ``x``)."""
    ident = "x" if name == "self" else re.sub(r"\W", "_", name)
    if keyword.iskeyword(ident) or ident in ("op", "ctx", "out") or ident[0].isdigit():
        ident += "_"
    while ident in taken:
        ident += "_"
    return ident


def _parts(op_name: str) -> tuple[str, str]:
    key = op_name.removeprefix("torch.ops.")
    if schemas.get(key) is None:
        hint = ""
        if key.count(".") == 1:
            overloads = [k for k in schemas.keys() if k.startswith(key + ".")]
            hint = f" (its overloads: {', '.join(overloads[:8])})" if overloads else ""
        raise ScaffoldError(key, f"not an ATen overload of the schema table (torch {schemas.torch_version()}){hint}")
    _, name, overload = key.split(".")
    return name, overload


def rule_filename(op_name: str) -> str:
    """A file name for the plug-in of ``op_name``: ``logit_default.py``."""
    name, overload = _parts(op_name)
    return f"{name}_{overload}.py"


def py_literal(value: Any) -> str:
    """``value`` as Python source, strings in double quotes (the style of the files we write)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_literal(k)}: {py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(py_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)


# ----------------------------------------------------------------------------- describing
def _default_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return repr(value)


def schema_text(op_name: str) -> str:
    """``aten.logit.default(Tensor self, float? eps=None) -> Tensor``."""
    key = op_name.removeprefix("torch.ops.")
    s = schemas.get(key)
    args, star = [], False
    for a in s.arguments:
        if a.kwarg_only and not star:
            args.append("*")
            star = True
        args.append(f"{a.type} {a.name}" + (f"={_default_text(a.default)}" if a.has_default else ""))
    rets = [f"{r.type} {r.name}".strip() for r in s.returns]
    ret = rets[0] if len(rets) == 1 else f"({', '.join(rets)})"
    return f"{key}({', '.join(args)}) -> {ret}"


def tensor_text(opd: Operand) -> str:
    """``%x: f32[1, 3, 8]``."""
    shape = "?" if opd.shape is None else "[" + ", ".join(str(d) for d in opd.shape) + "]"
    return f"%{opd.name}: {opd.dtype or '?'}{shape}"


def tensor_args(op_name: str, node: Operator | None) -> list[tuple[str, str, Any]]:
    """``(argument, kind, what)`` for each tensor argument: kind ``one`` (what: the node's
    operand or None), ``optional`` or ``list`` (what: the node's operands)."""
    out = []
    for a in schemas.get(op_name).arguments:
        if not a.is_tensor or a.is_out:
            continue
        if a.type.startswith("Tensor[") or a.type.startswith("Tensor?["):
            got = [] if node is None else [o for n, o in zip(node.input_names, node.inputs)
                                            if n.startswith(a.name + ".")]
            out.append((a.name, "list", got))
        else:
            out.append((a.name, "optional" if a.is_optional else "one",
                        None if node is None else node.named_input(a.name)))
    return out


def scalar_args(op_name: str) -> list:
    """The schema arguments that are not tensors (nor ``out=``)."""
    return [a for a in schemas.get(op_name).arguments if not a.is_tensor and not a.is_out]


def _node_lines(op_name: str, node: Operator, model: str | None) -> list[str]:
    where = f" of {os.path.basename(model)}" if model else ""
    lines = [f"Made from node `{node.name}`{where}:"]
    module = node.provenance.modules[0] if node.provenance.modules else ""
    if module:
        lines.append(f"    module:  {module}")
    src = node.meta.get("source")
    if src:
        code = f": {src.code.strip()}" if getattr(src, "code", "") else ""
        func = f" in {src.function}" if getattr(src, "function", "") else ""
        lines.append(f"    source:  {src}{func}{code}")
    for name, kind, what in tensor_args(op_name, node):
        if kind == "list":
            text = "[" + ", ".join(tensor_text(o) for o in what) + "]"
        else:
            text = "None" if what is None else tensor_text(what)
        lines.append(f"    {name} = {text}")
    for a in scalar_args(op_name):
        value = node.params.get(a.name)
        lines.append(f"    {a.name} = {value!r}" + ("  (default)" if a.name in node.meta.get("defaulted", ()) else ""))
    outs = [tensor_text(o) for o in node.outputs if not o.meta.get("none")]
    lines.append(f"    returns {', '.join(outs)}")
    return lines


_TEMPLATE_TEXT = {
    "pnnx": "lower to existing pnnx ops with ctx.emit (write the body of the rule below).",
    "ncnn_custom": ("one ncnn layer of your own: implement it in C++ and register it with "
                    "Net::register_custom_layer; its reference function below is what pt2ncnn verify runs for it."),
    "decompose": ("the op is replaced by the ATen ops PyTorch decomposes it into (traced for the "
                  "node's arguments), which the built-in rules then convert."),
}


def _docstring(op_name: str, node: Operator | None, model: str | None, template: str) -> list[str]:
    lines = [f'"""Converter plug-in for {op_name} (written by pt2ncnn scaffold; edit freely).', "",
             f"Schema (torch {schemas.torch_version()}):", f"    {schema_text(op_name)}", ""]
    if node is not None:
        lines += _node_lines(op_name, node, model) + [""]
    lines += textwrap.wrap(f"Template {template}: {_TEMPLATE_TEXT[template]}", 100) + ["",
              "Use: pt2ncnn convert MODEL.pt2 --converters THIS_FILE.py (or the folder holding it)",
              '"""']
    return lines


# ----------------------------------------------------------------------------- validator
def _validator(op_name: str, node: Operator | None, exact_shapes: bool, traced_for: dict | None) -> list[str]:
    seen = {}
    for name, kind, what in tensor_args(op_name, node):
        if kind != "list" and isinstance(what, Operand) and what.shape is not None:
            seen[name] = (what.dtype, list(what.shape) if exact_shapes else len(what.shape))
    what = "dtype and shape" if exact_shapes else "dtype and rank"
    lines = [f"#: what the node this file was made from had: {what} of each tensor argument",
             "#: (the validator accepts only these; relax it as your rule handles more)",
             f"SEEN = {py_literal(seen)}"]
    if traced_for:
        lines += ["#: the decomposition below was traced for these argument values", f"TRACED_FOR = {py_literal(traced_for)}"]
    has = "t.shape" if exact_shapes else "t.rank"
    lines += ["", "", "def check(op, ctx):",
              '    """None to take ``op``; "unsupported: <reason>" to leave it (to other rules, or unconverted)."""',
              "    for arg, (dtype, seen) in SEEN.items():",
              "        t = op.named_input(arg)",
              f"        if t is None or t.dtype != dtype or {has} != seen:",
              f'            got = "absent" if t is None else f"{{t.dtype}} {{{has}}}"',
              '            return f"unsupported: {arg} is {got}; this rule was written for {dtype} {seen}"']
    if traced_for:
        lines += ["    for arg, value in TRACED_FOR.items():",
                  "        if op.params.get(arg) != value:",
                  '            return (f"unsupported: {arg}={op.params.get(arg)!r}; the decomposition was traced for "',
                  '                    f"{arg}={value!r} (scaffold again for this node)")']
    lines.append("    return None")
    return lines


# ----------------------------------------------------------------------------- rule bodies
def _unpack(op_name: str, node: Operator | None, scalars: bool = True) -> tuple[list[str], dict[str, str]]:
    """Lines reading the op's tensor (and ``scalars``) arguments into variables; argument
    name → variable."""
    lines, names = [], {}
    for name, kind, what in tensor_args(op_name, node):
        var = names[name] = _identifier(name, names.values())
        if kind == "list":
            lines.append(f'    {var} = [t for n, t in zip(op.input_names, op.inputs) if n.startswith("{name}.")]')
        else:
            note = f"  # {tensor_text(what)} in the node" if isinstance(what, Operand) else ""
            if kind == "optional":
                note = note or "  # None when not given"
            lines.append(f'    {var} = op.named_input("{name}"){note}')
    for a in scalar_args(op_name) if scalars else ():
        var = names[a.name] = _identifier(a.name, names.values())
        note = f"  # {node.params.get(a.name)!r} in the node" if node is not None else f"  # {a.type}"
        lines.append(f'    {var} = op.params.get("{a.name}"){note}')
    return lines, names


def _pnnx_rule(op_name: str, node: Operator | None, fn: str) -> list[str]:
    lines, names = _unpack(op_name, node)
    tensors = [names[n] for n, kind, _ in tensor_args(op_name, node) if kind == "one"]
    first = tensors[0] if tensors else "x"
    expr_in = ", ".join(tensors) or first
    at = ",".join(f"@{i}" for i in range(len(tensors))) or "@0"
    return [f'@aten_converter("{op_name}", validator=check)', f"def {fn}(ctx, op):",
            f'    """{op_name} as pnnx ops: emit them with ctx.emit and return the operand that',
            '    replaces the output (a list of them for several outputs)."""'] + lines + [
        "    # For example (pnnx op types and params as pnnx names them: F.relu, torch.clamp, ...):",
        f'    #   return ctx.emit("pnnx.Expression", [{expr_in}], params={{"expr": "mul({at})"}})',
        f'    #   return ctx.emit("torch.clamp", [{first}], params={{"min": 0.0, "max": 6.0}})',
        f'    ctx.unsupported(f"write me: the rule {fn} in {{__file__}} has no body yet")']


def _ncnn_number(a, node: Operator | None) -> str | None:
    """How the layer param of scalar argument ``a`` is read from the pnnx op (None: not a number)."""
    base = a.type.rstrip("?").split("[")[0]
    if base not in ("int", "SymInt", "float", "SymFloat", "Scalar", "bool"):
        return None
    if node is not None:
        v = node.params.get(a.name)
        if v is None or (isinstance(v, str)) or (isinstance(v, list) and not all(isinstance(e, (int, float)) for e in v)):
            return None
    get = f'op.params["{a.name}"]'
    return f"int({get})" if base == "bool" and "[" not in a.type else get


def _layer_type(name: str, overload: str) -> str:
    """A custom ncnn layer type for the overload (``SpecialErfinv``), never a built-in's name."""
    from ..ncnn.layers import LayerSpecError, get_spec

    layer = "".join(w.capitalize() for w in name.split("_")) + ("" if overload == "default" else overload.capitalize())
    try:
        get_spec(layer)
    except LayerSpecError:
        return layer
    return layer + "Custom"


def _ncnn_custom_rule(op_name: str, node: Operator | None, fn: str) -> list[str]:
    name, overload = _parts(op_name)
    layer = _layer_type(name, overload)
    tensors = [(n, kind) for n, kind, _ in tensor_args(op_name, node)]
    numbers = [(a, _ncnn_number(a, node)) for a in scalar_args(op_name)]
    passed = [(a, how) for a, how in numbers if how is not None]
    left = [a for a, how in numbers if how is None]
    ins = [f'op.named_input("{t}")' if kind != "list" else
           f'*[x for n, x in zip(op.input_names, op.inputs) if n.startswith("{t}.")]' for t, kind in tensors]
    lines = [f'LAYER = "{layer}"  #: the ncnn layer type you implement (Net::register_custom_layer)',
             f'PNNX = "pnnx.{layer}"  #: the pnnx op between the two rules',
             "", "",
             f'@aten_converter("{op_name}", validator=check)', f"def {fn}(ctx, op):",
             f'    """{op_name} as one pnnx op holding its tensors and scalar arguments."""',
             f"    return ctx.emit(PNNX, [{', '.join(ins)}], params=dict(op.params))"]
    elementwise = node is None or all(
        o.shape is not None and o.shape == node.outputs[0].shape for o in node.inputs if o.shape)
    if elementwise and any(kind != "list" for _, kind in tensors):
        lines += ["", "", "@layout_rule(PNNX)", f"def {name}_layout(op):",
                  '    """Elementwise: each axis of the output is computed on its own, so the batch axis can',
                  '    stay out of the blob (delete this rule if your op mixes axes)."""',
                  "    return OpLayout(broadcast_links(op))"]
    params = [f"{i}: {how}" for i, (_, how) in enumerate(passed)]
    lines += ["", "", "@ncnn_rule(PNNX)", f"def {name}_layer(ctx, op):",
              '    """The pnnx op as the custom layer, the scalar arguments as its params {id: value}."""']
    if left:
        lines.append(f"    # not passed (not numbers): {', '.join(a.name for a in left)}")
    lines.append(f"    return ctx.emit(LAYER, list(op.inputs), params={{{', '.join(params)}}})")
    # the reference: PyTorch's own op on the layer's inputs and params
    args, targs = [], []
    names: dict[str, str] = {}
    pid = {a.name: i for i, (a, _) in enumerate(passed)}
    for a in schemas.get(op_name).arguments:
        if a.is_out:
            continue
        if a.is_tensor:
            var = names[a.name] = _identifier(a.name, names.values())
            targs.append(var)
            value = f"torch.from_numpy({var})" if not a.type.startswith("Tensor[") else f"[torch.from_numpy(t) for t in {var}]"
        elif a.name in pid:
            value = f"params[{pid[a.name]}]" + ("" if not a.type.startswith("bool") else " != 0")
        elif node is not None:
            value = repr(node.params.get(a.name))
        else:
            continue
        args.append(f"{a.name}={value}" if a.kwarg_only else value)
    lines += ["", "", "@ncnn_custom_layer(LAYER)", f"def {name}_reference({', '.join(targs + ['params'])}):",
              '    """The layer on numpy arrays in ncnn\'s layout (batch axis dropped): what pt2ncnn verify',
              "    compares with PyTorch, and what your C++ layer must compute. PyTorch's own op stands in",
              "    here (right for an elementwise op; one taking dims must shift them: ncnn's blob has no",
              '    batch axis)."""',
              "    import torch",
              "",
              f"    return torch.ops.{op_name}({', '.join(args)}).numpy()"]
    return lines


def _decompose_rule(op_name: str, node: Operator, fn: str, traced) -> list[str]:
    lines, names = _unpack(op_name, node, scalars=False)
    note = []
    if traced.unconverted:
        note = [f"    # NOTE: no rule converts {', '.join(traced.unconverted)} yet: scaffold a plug-in for it too"]
    return [f'@aten_converter("{op_name}", validator=check)', f"def {fn}(ctx, op):",
            f'    """{op_name} as the ATen ops of PyTorch\'s decomposition (traced for the node\'s',
            '    arguments); the built-in rules then convert each of them."""'] + note + lines + [
        "    out = op.outputs[0]"] + ["    " + ln for ln in traced.body(names)]


# ----------------------------------------------------------------------------- the file
def scaffold(op_name: str, *, node: Operator | None = None, template: str = "pnnx",
             model: str | None = None) -> str:
    """The source of a plug-in file converting ATen overload ``op_name`` (``aten.erfinv.default``)
    with ``template`` (one of :data:`TEMPLATES`), prefilled from ``node`` (an ATen-level operator
    of that overload, from a model's graph) when given; ``model`` names its file in the text.
    Raises :class:`ScaffoldError` for an unknown overload or template, a node of another op,
    or a ``decompose`` PyTorch cannot do for this node."""
    key = op_name.removeprefix("torch.ops.")
    name, overload = _parts(key)
    if template not in TEMPLATES:
        raise ScaffoldError(template, f"unknown template (choose from {', '.join(TEMPLATES)})")
    if node is not None and node.type != key:
        raise ScaffoldError(node.name, f"the node is {node.type}, not {key}")
    fn = f"{name}_{overload}"
    traced = None
    if template == "decompose":
        if node is None:
            raise ScaffoldError(key, "the decompose template needs a node of a model (its decomposition is "
                                     "traced for the node's arguments): give MODEL.pt2")
        from .decomposition import trace_decomposition

        traced = trace_decomposition(node)
    imports = {"pnnx": "from engine.convert import aten_converter",
               "decompose": "from engine.convert import aten_converter",
               "ncnn_custom": ("from engine.convert import OpLayout, aten_converter, layout_rule, ncnn_custom_layer, "
                               "ncnn_rule\nfrom engine.convert.layout import broadcast_links")}[template]
    if traced is not None and traced.needs_numpy:
        imports = "import numpy as np\n\n" + imports
    exact = traced is not None and traced.shape_sensitive
    lines = _docstring(key, node, model, template) + [imports, "", ""]
    lines += _validator(key, node, exact, traced.traced_for if traced is not None else None) + ["", ""]
    if template == "pnnx":
        lines += _pnnx_rule(key, node, fn)
    elif template == "ncnn_custom":
        lines += _ncnn_custom_rule(key, node, fn)
    else:
        lines += _decompose_rule(key, node, fn, traced)
    return "\n".join(lines).rstrip() + "\n"


# ----------------------------------------------------------------------------- nodes, files
def find_node(graph: Graph, op_name: str, node_name: str | None = None) -> Operator:
    """The operator named ``node_name`` of overload ``op_name`` in ``graph`` (the first of that
    overload when no name is given). Raises :class:`ScaffoldError` naming what there is."""
    key = op_name.removeprefix("torch.ops.")
    if node_name is not None:
        op = graph.find_op(node_name)
        if op is None:
            raise ScaffoldError(node_name, "no node of that name in the model")
        if op.type != key:
            raise ScaffoldError(node_name, f"the node is {op.type}, not {key}")
        return op
    found = [op for op in graph.ops if op.type == key]
    if not found:
        raise ScaffoldError(key, "the model has no node of this overload")
    return found[0]


def write_plugin(path: str | os.PathLike, text: str, *, force: bool = False) -> Path:
    """Write a plug-in file atomically (a temporary file renamed over ``path``); an existing
    file is replaced only with ``force``."""
    from ..writers.atomic import write_text_atomic

    p = Path(path)
    if p.exists() and not force:
        raise ScaffoldError(str(p), "the file exists (use --force to replace it)")
    write_text_atomic(p, text)
    return p
