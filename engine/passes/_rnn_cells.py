"""Matchers for one direction of one layer of core ATen's unrolled recurrent ops (used by the
``fuse_unrolled_rnn`` pass).

``run_decompositions()`` expands ``aten.lstm/gru/rnn_tanh/rnn_relu.input`` as
``torch/_decomp/decompositions.py`` writes them (``_rnn_helper``, ``one_layer_rnn``,
``one_layer_lstm``, ``lstm_cell``, ``gru_cell``). One layer direction is:

* the input projection of the whole sequence ``inp (T, B, I)``:
  ``view(addmm(b_ih, view(inp, [T*B, I]), permute(W_ih, [1, 0])), [T, B, G*H])`` (``mm``
  without biases; a ``bmm`` of expanded operands plus ``b_ih`` when ``inp`` is a
  transposed view), then ``flip([0])`` for the reverse direction, then one
  ``squeeze(slice(pre, 0, t, t+1), [0])`` per step;
* per step, ``hh = view(addmm(b_hh, view(h, [B, P]), permute(W_hh)), [1, B, G*H])`` and

  - RNN: ``h' = tanh|relu(hh + x_t)``;
  - LSTM: ``i, f, g, o = split(hh + x_t, H, 2)``; ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``;
    ``h' = sigmoid(o) * tanh(c')``, projected by ``view(mm(view(h'), permute(W_hr)))`` when
    ``proj_size`` is set;
  - GRU: ``r, z, n`` from ``split(x_t, H, 1)`` and ``split(hh, H, 2)``;
    ``r = sigmoid(hr + ir)``, ``z = sigmoid(hz + iz)``, ``n = tanh(in + hn * r)``,
    ``h' = (h - n) * z + n``;

* the initial state ``unsqueeze(squeeze(slice(hx, 0, k, k+1), [0]), 0)`` (row ``k`` of the
  op's ``hx``), the output ``cat(h'_0..h'_T-1, 0)`` in time order and the final states
  ``squeeze(h'_T-1, [0])``.

Operands may be shared (``h'`` feeds the next step, the output cat and the final squeeze); a
matcher only checks the structure and records the operators it accepted; the pass checks that
nothing outside uses their values.
"""
from __future__ import annotations


from ..ir import Operand, Operator
from ..ir.vocab import is_aten
from ..records import field, record

VIEWS = ("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default")
_MATMULS = ("aten.addmm.default", "aten.mm.default")
_SPLITS = ("aten.split_with_sizes.default", "aten.split.Tensor")
_ADD, _MUL, _SUB = "aten.add.Tensor", "aten.mul.Tensor", "aten.sub.Tensor"
_SIGMOID, _TANH = "aten.sigmoid.default", "aten.tanh.default"
_ACTIVATIONS = {_TANH: "rnn_tanh", "aten.relu.default": "rnn_relu"}


class NoMatch(Exception):
    """The operators here are not (all of) an unrolled recurrent layer."""


class Walk:
    """Structural matching helpers; every operator they accept is recorded in :attr:`ops`."""

    def __init__(self) -> None:
        self.ops: dict[Operator, None] = {}

    def take(self, op: Operator) -> Operator:
        self.ops[op] = None
        return op

    def producer(self, opd: Operand | None, *types: str) -> Operator:
        p = None if opd is None else opd.producer
        if p is None or p.type not in types or not is_aten(p):
            raise NoMatch(f"{getattr(opd, 'name', None)} is not made by {types}")
        return self.take(p)

    def user(self, opd: Operand, *types: str, sole: bool = True) -> Operator:
        """The one consumer of ``opd`` of these types (with ``sole``: its only consumer)."""
        found = [c for c in opd.consumers if c.type in types]
        if len(found) != 1 or (sole and len(opd.consumers) != 1):
            raise NoMatch(f"{opd.name} is not read by exactly one {types}")
        return self.take(found[0])

    def binary(self, a: Operand, b: Operand, type_: str) -> Operand:
        """The output of the ``type_`` op reading ``a`` and ``b`` (either order, alpha 1)."""
        for c in a.consumers:
            if c.type == type_ and len(c.inputs) == 2 and {id(i) for i in c.inputs} == {id(a), id(b)} \
                    and c.params.get("alpha", 1) == 1:
                return self.take(c).outputs[0]
        raise NoMatch(f"no {type_} of {a.name} and {b.name}")


def other_input(op: Operator, known: Operand) -> Operand:
    if len(op.inputs) != 2 or known not in op.inputs or op.params.get("alpha", 1) != 1:
        raise NoMatch(f"{op.name} is not a binary op of {known.name}")
    return op.inputs[1] if op.inputs[0] is known else op.inputs[0]


def _parameter(opd: Operand) -> Operand:
    p = opd.producer
    if p is None or p.type != "pnnx.Attribute" or opd.shape is None or len(opd.shape) not in (1, 2):
        raise NoMatch(f"{opd.name} is not a weight")
    return opd


def _transposed_weight(w: Walk, mat2: Operand) -> Operand:
    t = w.producer(mat2, "aten.permute.default", "aten.t.default", "aten.transpose.int")
    if t.type == "aten.permute.default" and [int(d) for d in t.params.get("dims", ())] != [1, 0]:
        raise NoMatch(f"{t.name} is not a 2-D transpose")
    return _parameter(t.inputs[0])


def matmul(w: Walk, mm: Operator) -> tuple[Operand, Operand, Operand | None]:
    """``(x, W, b)`` of ``addmm(b, x, W.T)`` / ``mm(x, W.T)`` (W, b weights)."""
    wanted = 3 if mm.type == "aten.addmm.default" else 2
    if len(mm.inputs) != wanted:  # a hand-edited or corrupt program
        raise NoMatch(f"{mm.name} has {len(mm.inputs)} operands, not {wanted}")
    if mm.type == "aten.addmm.default":
        if mm.params.get("beta", 1) != 1 or mm.params.get("alpha", 1) != 1:
            raise NoMatch(f"{mm.name} scales its terms")
        return mm.inputs[1], _transposed_weight(w, mm.inputs[2]), _parameter(mm.inputs[0])
    return mm.inputs[0], _transposed_weight(w, mm.inputs[1]), None


def _split(w: Walk, opd: Operand, parts: int, *, sole: bool = True) -> list[Operand]:
    """The ``parts`` equal chunks of ``opd`` along its last dim."""
    op = w.user(opd, *_SPLITS, sole=sole)
    rank = len(opd.shape)
    if int(op.params.get("dim", 0)) % rank != rank - 1 or len(op.outputs) != parts:
        raise NoMatch(f"{op.name} is not a split in {parts} along the last dim")
    return list(op.outputs)


# ---------------------------------------------------------------------------- one step
@record
class Step:
    """One time step of one layer direction."""

    kind: str  #: lstm | gru | rnn_tanh | rnn_relu (the ATen op's name)
    h_prev: Operand
    hy: Operand
    w_hh: Operand
    b_hh: Operand | None
    c_prev: Operand | None = None
    cy: Operand | None = None
    w_hr: Operand | None = None


def _hidden_matmul(w: Walk, hh: Operand) -> tuple[Operand, Operand, Operand | None]:
    """``(h, W_hh, b_hh)`` of ``hh = view(addmm(b_hh, view(h), W_hh.T))`` (a layer's step) or
    ``addmm(b_hh, h, W_hh.T)`` (a cell)."""
    if hh.producer is not None and hh.producer.type in _MATMULS:
        return matmul(w, w.producer(hh, *_MATMULS))
    mm = w.producer(w.producer(hh, *VIEWS).inputs[0], *_MATMULS)
    x2d, w_hh, b_hh = matmul(w, mm)
    return w.producer(x2d, *VIEWS).inputs[0], w_hh, b_hh


def _lstm(w: Walk, gates: Operand, h_prev: Operand, w_hh: Operand, b_hh: Operand | None) -> Step:
    gi, gf, gg, go = _split(w, gates, 4)
    i, f, o = (w.user(x, _SIGMOID).outputs[0] for x in (gi, gf, go))
    g = w.user(gg, _TANH).outputs[0]
    fc = w.user(f, _MUL)
    cy = w.binary(fc.outputs[0], w.binary(i, g, _MUL), _ADD)
    hy = w.binary(o, w.user(cy, _TANH, sole=False).outputs[0], _MUL)
    w_hr = None
    if w_hh.shape[1] != gates.shape[-1] // 4:  # proj_size: hy = view(mm(view(hy), W_hr.T))
        mm = w.user(w.user(hy, *VIEWS).outputs[0], "aten.mm.default")
        _, w_hr, _ = matmul(w, mm)
        hy = w.user(mm.outputs[0], *VIEWS).outputs[0]
    return Step("lstm", h_prev, hy, w_hh, b_hh, other_input(fc, f), cy, w_hr)


def _gru(w: Walk, x_t: Operand) -> Step:
    i_r, i_z, i_n = _split(w, x_t, 3)
    add_r = w.user(i_r, _ADD)
    hh_r = other_input(add_r, i_r)
    hh = w.producer(hh_r, *_SPLITS)
    if hh.outputs[0] is not hh_r or len(hh.outputs) != 3:
        raise NoMatch(f"{hh.name} is not the hidden gates' split")
    _, h_z, h_n = hh.outputs
    h_prev, w_hh, b_hh = _hidden_matmul(w, hh.inputs[0])
    r = w.user(add_r.outputs[0], _SIGMOID).outputs[0]
    z = w.user(w.binary(h_z, i_z, _ADD), _SIGMOID).outputs[0]
    n = w.user(w.binary(i_n, w.binary(h_n, r, _MUL), _ADD), _TANH).outputs[0]
    subs = [c for c in n.consumers if c.type == _SUB and c.inputs == [h_prev, n] and c.params.get("alpha", 1) == 1]
    if len(subs) != 1:
        raise NoMatch(f"no h - n for {n.name}")
    hy = w.binary(w.binary(w.take(subs[0]).outputs[0], z, _MUL), n, _ADD)
    return Step("gru", h_prev, hy, w_hh, b_hh)


def step(w: Walk, x_t: Operand) -> Step:
    """The cell reading ``x_t`` (the step's slice of the input projection)."""
    if len(x_t.consumers) != 1:
        raise NoMatch(f"{x_t.name} has {len(x_t.consumers)} users")
    first = x_t.consumers[0]
    if first.type in _SPLITS:
        return _gru(w, x_t)
    if first.type != _ADD:
        raise NoMatch(f"{x_t.name} feeds {first.type}")
    w.take(first)
    h_prev, w_hh, b_hh = _hidden_matmul(w, other_input(first, x_t))
    gates = first.outputs[0]
    if len(gates.consumers) == 1 and gates.consumers[0].type in _ACTIVATIONS:
        act = w.take(gates.consumers[0])
        return Step(_ACTIVATIONS[act.type], h_prev, act.outputs[0], w_hh, b_hh)
    return _lstm(w, gates, h_prev, w_hh, b_hh)


# ---------------------------------------------------------------------------- one direction
@record
class Chain:
    """One direction of one layer: its input, weights, state rows and values."""

    kind: str
    inp: Operand  #: (T, B, I)
    reverse: bool
    weights: list[Operand]  #: torch's order: W_ih, W_hh[, b_ih, b_hh][, W_hr]
    has_bias: bool
    hx: Operand  #: the op's h0 (L*D, B, P)
    cx: Operand | None  #: the op's c0 (LSTM)
    row: int  #: which row of hx/cx this direction starts from
    hs: list[Operand]  #: h' per step, in processing order
    cs: list[Operand]
    out: Operand | None  #: cat of hs in time order (None when unused)
    ops: dict[Operator, None] = field(default_factory=dict)


def _time_step(w: Walk, op: Operator, steps: int) -> tuple[int, Operand]:
    """``(t, x_t)`` for ``squeeze(slice(pre, 0, t, t+1), [0])`` or ``select(pre, 0, t)``."""
    w.take(op)
    if op.type == "aten.select.int" and int(op.params.get("dim", -1)) == 0:
        return int(op.params["index"]) % steps, op.outputs[0]
    if op.type != "aten.slice.Tensor" or int(op.params.get("dim", -1)) != 0 or op.params.get("step", 1) != 1:
        raise NoMatch(f"{op.name} is not a time step")
    start = int(op.params.get("start") or 0)
    if min(int(op.params.get("end", steps)), steps) != start + 1:
        raise NoMatch(f"{op.name} takes more than one step")
    sq = w.user(op.outputs[0], "aten.squeeze.dims", "aten.squeeze.dim")
    dims = sq.params.get("dim")
    if [int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])] != [0]:
        raise NoMatch(f"{sq.name} does not squeeze dim 0")
    return start, sq.outputs[0]


def _same_shape_copies(w: Walk, opd: Operand) -> Operand:
    """``opd`` before any single-use view/expand that keeps its shape (F.linear's bmm form)."""
    while True:
        p = opd.producer
        if p is None or p.type not in (*VIEWS, "aten.expand.default") or len(opd.consumers) != 1 \
                or p.inputs[0].shape != opd.shape:
            return opd
        w.take(p)
        opd = p.inputs[0]


def _batched_weight(w: Walk, mat2: Operand) -> Operand:
    """W for ``view(expand(W.T, [T, I, GH]))`` (the bmm form's right operand)."""
    v = w.producer(mat2, *VIEWS)
    e = w.producer(v.inputs[0], "aten.expand.default")
    return _transposed_weight(w, e.inputs[0])


def _input_projection(w: Walk, mm: Operator) -> tuple[Operand, Operand, Operand, Operand | None]:
    """``(inp, pre, W_ih, b_ih)`` of ``pre = F.linear(inp, W_ih, b_ih)`` as core ATen spells it
    for a 3-D ``inp``: ``view(addmm(b, view(inp, [T*B, I]), W.T), [T, B, GH])`` (``mm``
    without bias), or for a non-contiguous ``inp``
    ``view(bmm(view(expand(inp)), view(expand(W.T))), [T, B, GH]) (+ b)``."""
    w.take(mm)
    if mm.type != "aten.bmm.default":
        x2d, w_ih, b_ih = matmul(w, mm)
        inp = w.producer(x2d, *VIEWS).inputs[0]
        return inp, w.user(mm.outputs[0], *VIEWS).outputs[0], w_ih, b_ih
    inp = _same_shape_copies(w, mm.inputs[0])
    w_ih = _batched_weight(w, mm.inputs[1])
    pre = mm.outputs[0]
    if len(pre.consumers) == 1 and pre.consumers[0].type in VIEWS:
        pre = w.user(pre, *VIEWS).outputs[0]
    b_ih = None
    if len(pre.consumers) == 1 and pre.consumers[0].type == _ADD:
        add = pre.consumers[0]
        b_ih = _parameter(other_input(add, pre))
        pre = w.take(add).outputs[0]
    return inp, pre, w_ih, b_ih


def _projection(w: Walk, mm: Operator):
    """``(inp, W_ih, b_ih, reverse, [x_0..x_T-1])`` of a layer direction's input projection."""
    inp, pre, w_ih, b_ih = _input_projection(w, mm)
    if inp.shape is None or pre.shape is None or len(inp.shape) != 3 or len(pre.shape) != 3 \
            or pre.shape[:2] != inp.shape[:2] or not isinstance(pre.shape[0], int):
        raise NoMatch(f"{mm.name} is not a sequence projection")
    reverse = len(pre.consumers) == 1 and pre.consumers[0].type == "aten.flip.default"
    if reverse:
        flip = w.user(pre, "aten.flip.default")
        if [int(d) for d in flip.params.get("dims", ())] != [0]:
            raise NoMatch(f"{flip.name} does not flip time")
        pre = flip.outputs[0]
    steps = pre.shape[0]
    xs: list[Operand | None] = [None] * steps
    for c in list(pre.consumers):
        t, x_t = _time_step(w, c, steps)
        if xs[t] is not None:
            raise NoMatch(f"step {t} of {pre.name} read twice")
        xs[t] = x_t
    if any(x is None for x in xs):
        raise NoMatch(f"not every step of {pre.name} is read")
    return inp, w_ih, b_ih, reverse, xs


def _state_row(w: Walk, h: Operand) -> tuple[Operand, int]:
    """``(hx, k)`` for the initial state ``unsqueeze(squeeze(slice(hx, 0, k, k+1), [0]), 0)``."""
    un = w.producer(h, "aten.unsqueeze.default")
    if int(un.params.get("dim", -1)) != 0:
        raise NoMatch(f"{un.name} does not add dim 0")
    src = un.inputs[0].producer
    if src is not None and src.type == "aten.select.int":
        w.take(src)
        return src.inputs[0], int(src.params["index"])
    sq = w.producer(un.inputs[0], "aten.squeeze.dims", "aten.squeeze.dim")
    sl = w.producer(sq.inputs[0], "aten.slice.Tensor")
    start = int(sl.params.get("start") or 0)
    if int(sl.params.get("dim", -1)) != 0 or int(sl.params.get("end", 0)) != start + 1:
        raise NoMatch(f"{sl.name} is not one state row")
    return sl.inputs[0], start


def cat_of(w: Walk, parts: list[Operand], dim: int) -> Operand | None:
    """The output of ``cat(parts, dim)`` if some op computes exactly that, else None."""
    for c in parts[0].consumers:
        if c.type == "aten.cat.default" and c.inputs == parts and \
                int(c.params.get("dim", 0)) % len(parts[0].shape) == dim:
            return w.take(c).outputs[0]
    return None


#: ops that may start a layer direction's input projection
PROJECTIONS = ("aten.addmm.default", "aten.mm.default", "aten.bmm.default")


def chain(mm: Operator) -> Chain:
    """The layer direction whose input projection is ``mm`` (raises :class:`NoMatch`)."""
    w = Walk()
    inp, w_ih, b_ih, reverse, xs = _projection(w, mm)
    steps = [step(w, x) for x in xs]
    first = steps[0]
    for prev, s in zip(steps, steps[1:]):
        if (s.kind, s.w_hh, s.b_hh, s.w_hr) != (first.kind, first.w_hh, first.b_hh, first.w_hr) \
                or s.h_prev is not prev.hy or s.c_prev is not prev.cy:
            raise NoMatch(f"steps of {mm.name} do not chain")
    if (b_ih is None) != (first.b_hh is None):
        raise NoMatch(f"{mm.name}: one bias of two")
    hx, row = _state_row(w, first.h_prev)
    cx = None
    if first.kind == "lstm":
        cx, c_row = _state_row(w, first.c_prev)
        if c_row != row:
            raise NoMatch(f"{mm.name}: h0 and c0 rows differ")
    weights = [w_ih, first.w_hh] + ([b_ih, first.b_hh] if b_ih is not None else []) + \
        ([first.w_hr] if first.w_hr is not None else [])
    hs, cs = [s.hy for s in steps], [s.cy for s in steps if s.cy is not None]
    out = cat_of(w, hs[::-1] if reverse else hs, 0)
    return Chain(first.kind, inp, reverse, weights, b_ih is not None, hx, cx, row, hs, cs, out, w.ops)


# ---------------------------------------------------------------------------- one cell
@record
class Cell:
    """One ``nn.LSTMCell``/``GRUCell``/``RNNCell`` call: ``F.linear(x, W_ih, b_ih)`` fed to a step."""

    x: Operand
    step: Step
    weights: list[Operand]  #: W_ih, W_hh[, b_ih, b_hh]
    ops: dict[Operator, None]


def cell(mm: Operator) -> Cell:
    """The cell whose input projection is ``mm`` (2-D ``x``); raises :class:`NoMatch`.

    torch's cells add the hidden part first (``F.linear(h) + F.linear(x)``): that operand order
    tells the input from the state (for LSTM/RNN cells swapping them would compute the same)."""
    w = Walk()
    w.take(mm)
    x, w_ih, b_ih = matmul(w, mm)
    x_t = mm.outputs[0]
    if x.shape is None or len(x.shape) != 2 or len(x_t.consumers) != 1:
        raise NoMatch(f"{mm.name} is not a cell's input projection")
    first = x_t.consumers[0]
    probe = first.outputs[0] if first.type in _SPLITS else x_t
    if not probe.consumers or probe.consumers[0].inputs[-1] is not probe:
        raise NoMatch(f"{mm.name} is not the second operand of the gates")
    s = step(w, x_t)
    states = [s.h_prev] + ([s.c_prev] if s.c_prev is not None else [])
    if s.w_hr is not None or (b_ih is None) != (s.b_hh is None) or s.hy.shape != s.h_prev.shape \
            or any(st.shape != [x.shape[0], s.w_hh.shape[1]] for st in states):
        raise NoMatch(f"{mm.name}: the cell's shapes or biases do not fit")
    weights = [w_ih, s.w_hh] + ([b_ih, s.b_hh] if b_ih is not None else [])
    return Cell(x, s, weights, w.ops)
