"""Put core ATen's unrolled LSTM / GRU / RNN layers and cells back together (ATen level,
before folding).

``run_decompositions()`` replaces ``aten.lstm.input``, ``aten.gru.input``,
``aten.rnn_tanh.input`` and ``aten.rnn_relu.input`` by one cell per time step, layer and
direction (the pattern is described in :mod:`engine.passes._rnn_cells`). Converted op by op that
is dozens of ncnn layers per time step, fixed to the exported sequence length, with 3-D
``(1, B, H)`` intermediates in the batch-at-dim-1 layout ncnn cannot express. This pass finds
the unrolled layers and replaces each recurrent module by the op it came from, so both dialects
reach the ``recurrent`` converter and become one ncnn ``LSTM``/``GRU``/``RNN`` layer per torch
layer.

A module is recognised from its layer directions (:func:`engine.passes._rnn_cells.chain`):

* directions reading the same input from the same state tensor form a layer: one forward, or a
  forward and a reverse one whose outputs are ``cat(..., 2)``-ed;
* layers chained output → input with the same state tensor(s) (row ``layer * D + direction``
  each, all rows used) form the module;
* ``permute(x, [1, 0, 2])`` before the first layer and after the last makes it ``batch_first``;
* the final states ``squeeze(h'_last, [0])`` of every direction, ``cat``-ed along dim 0 (and
  viewed to ``(L*D, B, H)``), are the ``h_n`` (``c_n``) outputs; unused ones were dropped by
  export and stay absent.

Cells (``nn.LSTMCell``/``GRUCell``/``RNNCell``, decomposed into the same step with
``F.linear(x)`` in place of the sequence slice, :func:`engine.passes._rnn_cells.cell`) become
``aten.lstm_cell/gru_cell/rnn_tanh_cell/rnn_relu_cell.default`` again.

The replacement takes over the module's output values (names, shapes, provenance union); it is
only made when nothing outside the module reads an intermediate value. Anything that does not
match stays as it is (and is converted op by op, or reported).
"""
from __future__ import annotations

import logging

from ..ir import Graph, Operand, Operator, Provenance
from . import _rnn_cells as cells
from ..records import record
from .manager import graph_pass

log = logging.getLogger(__name__)

#: replaced operand → its successor (operands hash by identity)
_Subs = dict[Operand, Operand]


@record
class _Layer:
    """One layer of an unrolled recurrent module: its cell chains and output."""

    chains: list[cells.Chain]  #: forward[, reverse]
    out: Operand | None


@record
class _Module:
    """An unrolled recurrent module found in the graph, fused as one ``nn.LSTM``/``GRU``/``RNN``."""

    layers: list[_Layer]
    x: Operand
    outputs: list[Operand | None]  #: output, h_n[, c_n]
    batch_first: bool
    ops: dict[Operator, None]

    @property
    def first(self) -> cells.Chain:
        return self.layers[0].chains[0]


def _layers(chains: list[cells.Chain]) -> list[_Layer]:
    """Directions reading the same input from the same state tensor, paired into layers."""
    w = cells.Walk()
    groups: dict[tuple[int, int], list[cells.Chain]] = {}
    for c in chains:
        groups.setdefault((id(c.inp), id(c.hx)), []).append(c)
    layers = []
    for group in groups.values():
        fwd = [c for c in group if not c.reverse]
        rev = [c for c in group if c.reverse]
        if len(fwd) != 1 or len(rev) > 1:
            continue
        if not rev:
            layers.append(_Layer(fwd, fwd[0].out))
        elif (fwd[0].out is None) == (rev[0].out is None):
            out = None if fwd[0].out is None else cells.cat_of(w, [fwd[0].out, rev[0].out], 2)
            if fwd[0].out is None or out is not None:
                layers.append(_Layer(fwd + rev, out))
    return layers


def _stacks(layers: list[_Layer]) -> list[list[Operand]]:
    """The layers' rows in state order: ``[[h'_last...], [c'_last...]]``."""
    chains = [c for layer in layers for c in layer.chains]
    stacks = [[c.hs[-1] for c in chains]]
    if chains[0].kind == "lstm":
        stacks.append([c.cs[-1] for c in chains])
    return stacks


def _final_state(w: cells.Walk, rows: list[Operand], shape: list) -> Operand | None:
    """``stack([squeeze(r, [0]) for r in rows])`` as core ATen spells it (cat + view), or None
    when export dropped it; raises NoMatch for anything else reading the rows."""
    squeezes = [[c for c in r.consumers if c.type in ("aten.squeeze.dims", "aten.squeeze.dim")] for r in rows]
    if not any(squeezes):
        return None
    if any(len(s) != 1 for s in squeezes):
        raise cells.NoMatch("final states are not all squeezed")
    parts = [w.take(s[0]).outputs[0] for s in squeezes]
    cat = cells.cat_of(w, parts, 0)
    if cat is None:
        raise cells.NoMatch("final states are not stacked")
    view = w.user(cat, *cells.VIEWS)
    if list(view.outputs[0].shape) != list(shape):
        raise cells.NoMatch(f"{view.name} does not stack the final states")
    return view.outputs[0]


def _batch_first(w: cells.Walk, x: Operand, out: Operand | None, module_ops) -> tuple[Operand, Operand | None, bool]:
    """Absorb the transposes of a ``batch_first`` module: ``(x, out, batch_first)``."""
    p = x.producer
    if p is None or not _swaps_01(p) or any(c not in module_ops for c in x.consumers):
        return x, out, False
    if out is not None:
        if len(out.consumers) != 1 or not _swaps_01(out.consumers[0]):
            return x, out, False
        out = w.take(out.consumers[0]).outputs[0]
    w.take(p)
    return p.inputs[0], out, True


def _swaps_01(op: Operator) -> bool:
    if op.type == "aten.permute.default":
        return [int(d) for d in op.params.get("dims", ())] == [1, 0, 2]
    return op.type == "aten.transpose.int" and {int(op.params.get("dim0", -1)), int(op.params.get("dim1", -1))} == {0, 1}


def _next(layer: _Layer, layers: list[_Layer]) -> _Layer | None:
    """The layer reading ``layer``'s output from the same state tensor."""
    hx = layer.chains[0].hx
    found = [n for n in layers if layer.out is not None and n.chains[0].inp is layer.out and n.chains[0].hx is hx]
    return found[0] if len(found) == 1 else None


def _module(start: _Layer, all_layers: list[_Layer]) -> _Module:
    layers = [start]
    while (nxt := _next(layers[-1], all_layers)) is not None:
        layers.append(nxt)
    first = start.chains[0]
    dirs = len(start.chains)
    for j, layer in enumerate(layers):
        for d, c in enumerate(layer.chains):
            if (c.kind, c.hx, c.cx, c.has_bias, len(layer.chains)) != (first.kind, first.hx, first.cx, first.has_bias, dirs) \
                    or c.row != j * dirs + d:
                raise cells.NoMatch(f"{c.inp.name}: layer {j} does not continue the module")
    if first.hx.shape is None or first.hx.shape[0] != len(layers) * dirs:
        raise cells.NoMatch(f"{first.hx.name} has rows for more layers than found")
    w = cells.Walk()
    for layer in layers:
        for c in layer.chains:
            w.ops.update(c.ops)
    for layer in layers:
        if layer.out is not None and layer.out.producer is not None and len(layer.chains) == 2:
            w.take(layer.out.producer)
    x, out, batch_first = _batch_first(w, first.inp, layers[-1].out, w.ops)
    batch = first.hx.shape[1]
    states = [_final_state(w, rows, [len(layers) * dirs, batch, rows[0].shape[-1]]) for rows in _stacks(layers)]
    return _Module(layers, x, [out, *states], batch_first, w.ops)


def _check_closed(ops: dict[Operator, None], outputs: list[Operand | None]) -> None:
    """Nothing outside ``ops`` reads their values, except ``outputs``."""
    keep = {id(o) for o in outputs if o is not None}
    for op in ops:
        for o in op.outputs:
            if id(o) not in keep and any(c not in ops for c in o.consumers):
                raise cells.NoMatch(f"{o.name} is used outside the recurrent layer")


def _output_shapes(m: _Module) -> list[list]:
    first = m.first
    dirs, layers = len(m.layers[0].chains), len(m.layers)
    t, b = first.inp.shape[0], first.inp.shape[1]
    width = first.hs[0].shape[-1]
    seq = [b, t, dirs * width] if m.batch_first else [t, b, dirs * width]
    shapes = [seq, [layers * dirs, b, width]]
    if first.kind == "lstm":
        shapes.append([layers * dirs, b, first.cs[0].shape[-1]])
    return shapes


def _replace(graph: Graph, ops: dict[Operator, None], target: str, inputs: list[Operand], input_names: list[str],
             outputs: list[Operand | None], shapes: list[list], params: dict, subs: _Subs) -> Operator:
    """Replace ``ops`` by one ``target`` op producing ``outputs`` (same operands' names and
    meta; a placeholder of ``shapes[k]`` for an output export dropped). ``subs`` maps the
    replaced operands to their successors (a later module found beforehand may read them: a
    stacked module's initial state is an earlier one's ``h_n``), and is updated."""
    inputs = [subs.get(i, i) for i in inputs]
    order = {id(op): i for i, op in enumerate(graph.ops)}
    by_order = sorted(ops, key=lambda op: order[id(op)])
    name = graph.unique_op_name(target.split(".")[1])
    fresh = []
    for k, (old, shape) in enumerate(zip(outputs, shapes)):
        o = graph.new_operand(f"{name}_out{k}", dtype=inputs[0].dtype, shape=shape if old is None else old.shape)
        if old is not None:
            o.meta = dict(old.meta)
            graph.replace_all_uses(old, o)
            subs[old] = o
        fresh.append(o)
    new = graph.add_op(target, name, inputs, fresh, params=params, input_names=input_names,
                       provenance=Provenance.merge(op.provenance for op in ops), before=by_order[0])
    new.meta.update({k: by_order[-1].meta[k] for k in ("source", "module_stack") if k in by_order[-1].meta})
    new.meta.update(target=target, fused_from="unrolled")
    for op in reversed(by_order):
        for o in op.outputs:
            o.consumers.clear()  # only absorbed ops (checked) or the replaced outputs read them
        graph.remove_op(op)
    for old, o in zip(outputs, fresh):
        if old is not None:
            graph.rename_operand(o, old.name)
    graph.toposort()
    return new


def _replace_module(graph: Graph, m: _Module, subs: _Subs) -> Operator:
    first = m.first
    states = [first.hx] + ([first.cx] if first.cx is not None else [])
    state_names = ["hx.0", "hx.1"] if first.cx is not None else ["hx"]
    weights = [wt for layer in m.layers for c in layer.chains for wt in c.weights]
    params = {"has_biases": first.has_bias, "num_layers": len(m.layers), "dropout": 0.0, "train": False,
              "bidirectional": len(m.layers[0].chains) == 2, "batch_first": m.batch_first}
    return _replace(graph, m.ops, f"aten.{first.kind}.input", [m.x, *states, *weights],
                    ["input", *state_names, *(f"params.{i}" for i in range(len(weights)))], m.outputs,
                    _output_shapes(m), params, subs)


def _replace_cell(graph: Graph, c: cells.Cell, subs: _Subs) -> Operator:
    s = c.step
    states = [s.h_prev] + ([s.c_prev] if s.c_prev is not None else [])
    outputs = [s.hy] + ([s.cy] if s.cy is not None else [])
    names = ["input", *(["hx.0", "hx.1"] if s.c_prev is not None else ["hx"]), "w_ih", "w_hh", "b_ih", "b_hh"]
    inputs = [c.x, *states, *c.weights]
    return _replace(graph, c.ops, f"aten.{s.kind}_cell.default", inputs, names[:len(inputs)], outputs,
                    [o.shape for o in outputs], {}, subs)


def _fuse_modules(graph: Graph, subs: _Subs) -> None:
    chains = []
    for op in list(graph.ops):
        if op.type in cells.PROJECTIONS:
            try:
                chains.append(cells.chain(op))
            except cells.NoMatch as e:
                log.debug("no recurrent layer at %s: %s", op.name, e)
    layers = _layers(chains)
    continued = {id(n) for layer in layers if (n := _next(layer, layers)) is not None}
    for start in [layer for layer in layers if id(layer) not in continued]:
        try:
            module = _module(start, layers)
            _check_closed(module.ops, module.outputs)
        except cells.NoMatch as e:
            log.debug("recurrent layers at %s not fused: %s", start.chains[0].inp.name, e)
            continue
        new = _replace_module(graph, module, subs)
        log.debug("fused %d unrolled %s layer(s) into %s", len(module.layers), module.first.kind, new.name)


def _fuse_cells(graph: Graph, subs: _Subs) -> None:
    gone: set[int] = set()
    for op in list(graph.ops):
        if id(op) in gone or op.type not in ("aten.addmm.default", "aten.mm.default"):
            continue
        try:
            c = cells.cell(op)
            _check_closed(c.ops, [c.step.hy, c.step.cy])
        except cells.NoMatch as e:
            log.debug("no recurrent cell at %s: %s", op.name, e)
            continue
        gone.update(id(o) for o in c.ops)
        new = _replace_cell(graph, c, subs)
        log.debug("fused a %s cell into %s", c.step.kind, new.name)


@graph_pass("fuse_unrolled_rnn", "put core ATen's unrolled LSTM/GRU/RNN layers and cells back into recurrent ops")
def run(graph, cx):
    subs: _Subs = {}
    _fuse_modules(graph, subs)
    _fuse_cells(graph, subs)
