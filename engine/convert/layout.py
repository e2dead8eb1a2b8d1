"""How each pnnx operator relates the axes of its inputs and outputs: the facts the batch layout
solver (:mod:`engine.passes.infer_batch_axis`) works from.

An ncnn layer computes one sample at a time: the Mat's batch count ``n`` is an axis the layer
never sees. A PyTorch axis can be that batch axis only where every operator on the way computes
independently along it. For each pnnx operator type a rule states:

* **links** — ``Link(i, a, k, b)``: axis ``a`` of input ``i`` is axis ``b`` of output ``k``,
  and the operator computes each index along it on its own (elementwise ops link every axis,
  a softmax every axis but ``dim``, a permute moves axes, a reshape keeps the axes that stay
  whole, a linear layer keeps all but the last...). Links only join axes of equal size;
* **required** — ``{input index: axis}``: the ncnn layer reads the input with that axis as the
  batch (a convolution's ``(N, C, H, W)``: ncnn's Convolution takes a ``(C, H, W)`` blob, so N
  must be the batch), and ``required_out`` likewise for outputs.

An operator type without a rule is opaque: it links nothing, so it always sees its inputs with
every dim in the blob (the solver converts a batched input first). Converter families and
plug-ins add rules for their own types with :func:`layout_rule`.
"""
from __future__ import annotations

import functools
import math
from typing import Callable, Iterable, Sequence

from ..ir import Dim, Operand, Operator
from ..records import field, record


@record(frozen=True)
class Link:
    """Axis ``a`` of input ``i`` is axis ``b`` of output ``k`` (computed independently along it)."""

    i: int
    a: int
    k: int
    b: int


#: The rules' Links: each (i, a, k, b) made once and shared (a Link is frozen), since a solve asks
#: every operator's rule again and a graph repeats a few hundred links on thousands of operators.
_link = functools.lru_cache(maxsize=1 << 16)(Link)


@record
class OpLayout:
    """The layout facts of one operator."""

    links: list[Link] = field(default_factory=list)
    required: dict[int, int] = field(default_factory=dict)  #: input index → axis that must be the batch
    required_out: dict[int, int] = field(default_factory=dict)  #: output index → its batch axis
    #: a reshape-like op: any batch move is one ncnn Reshape (12/13 params), never a conversion
    free: bool = False
    #: the op reads its inputs in whatever layout they have (a shape query, an output marker)
    neutral: bool = False
    #: inputs read only for their sizes (shape expressions): taken in whatever layout they have
    measured: frozenset = frozenset()
    #: no broadcasting: an input linked to an output's batch axis takes that axis even where its
    #: extent is 1 (a concatenation joins whole samples; size 1 is not a broadcast there)
    exact: bool = False

    def links_from(self, i: int, a: int) -> Sequence[Link]:
        return self._index()[2].get((i, a), _NO_LINKS)

    def links_to(self, k: int, b: int) -> Sequence[Link]:
        return self._index()[3].get((k, b), _NO_LINKS)

    def _index(self) -> tuple:
        """``(links, len(links), by (input, axis), by (output, axis))``, built on first use and
        again when a rule added links since (an elementwise op of many inputs links every axis
        of each: a scan per query made the solver quadratic in the inputs)."""
        cached = self.__dict__.get("_links_index")
        links = self.links
        if cached is None or cached[0] is not links or cached[1] != len(links):
            by_in: dict = {}
            by_out: dict = {}
            for ln in links:
                by_in.setdefault((ln.i, ln.a), []).append(ln)
                by_out.setdefault((ln.k, ln.b), []).append(ln)
            cached = self.__dict__["_links_index"] = (links, len(links), by_in, by_out)
        return cached


#: what a query of an axis with no link returns (shared: callers only read it)
_NO_LINKS: tuple = ()


Rule = Callable[[Operator], "OpLayout | None"]
_RULES: dict[str, Rule] = {}


def layout_rule(*types: str):
    """Register ``fn(op) -> OpLayout | None`` as the layout rule of pnnx op ``types``."""

    def wrap(fn: Rule) -> Rule:
        for t in types:
            _RULES[t] = fn
        return fn

    return wrap


def layout_of(op: Operator) -> OpLayout:
    """The layout facts of ``op`` (an opaque layout when its type has no rule or the rule cannot
    tell, e.g. unknown shapes)."""
    rule = _RULES.get(op.type)
    if rule is None:
        return OpLayout()
    try:
        result = rule(op)
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
        result = None
    return result or OpLayout()


def has_rule(op_type: str) -> bool:
    return op_type in _RULES


# ----------------------------------------------------------------------------- helpers
def same_dim(x: Dim, y: Dim) -> bool:
    return x is not None and x == y


def _shape(opd: Operand) -> list[Dim] | None:
    return None if opd.shape is None else list(opd.shape)


def _norm(d: int, rank: int) -> int:
    if not -max(rank, 1) <= d < max(rank, 1):
        raise ValueError(f"dim {d} out of range for rank {rank}")
    return d % rank if rank else 0


def _dims_param(op: Operator, key: str, rank: int) -> list[int] | None:
    """A dim / list-of-dims param normalised (None: absent or None, i.e. all dims)."""
    v = op.params.get(key)
    if v is None:
        return None
    vals = v if isinstance(v, (list, tuple)) else [v]
    return sorted({_norm(int(d), rank) for d in vals})


def identity_links(op: Operator, i: int = 0, k: int = 0, skip: Iterable[int] = ()) -> list[Link]:
    """Links between input ``i`` and output ``k`` of the same rank for every axis not in
    ``skip`` whose size is the same on both sides."""
    x, y = _shape(op.inputs[i]), _shape(op.outputs[k])
    if x is None or y is None or len(x) != len(y):
        return []
    skip = set(skip)
    return [_link(i, a, k, a) for a in range(len(x)) if a not in skip and same_dim(x[a], y[a])]


def broadcast_links(op: Operator, inputs: Sequence[int] | None = None, k: int = 0,
                    skip_out: Iterable[int] = ()) -> list[Link]:
    """Elementwise links with right-aligned broadcasting: each input axis of the output's size
    (not a broadcast 1) is linked to its output axis."""
    y = _shape(op.outputs[k])
    if y is None:
        return []
    skip_out = set(skip_out)
    links = []
    for i in (range(len(op.inputs)) if inputs is None else inputs):
        x = _shape(op.inputs[i])
        if x is None or len(x) > len(y):
            continue
        off = len(y) - len(x)
        links += [_link(i, a, k, a + off) for a in range(len(x))
                  if a + off not in skip_out and same_dim(x[a], y[a + off])]
    return links


def _key(dims: Sequence[Dim]) -> tuple:
    n, syms = 1, []
    for d in dims:
        if isinstance(d, int):
            n *= d
        else:
            syms.append(str(d))
    return n, tuple(sorted(syms))


def reshape_axis(src: Sequence[Dim], a: int, dst: Sequence[Dim]) -> int | None:
    """Where axis ``a`` of ``src`` is, whole, in the row-major reshape to ``dst``: the axis of the
    same size after the same number of elements (None: it is merged or split). The elements
    before it are the same when those after it are (the totals are equal): a run-time ``-1``
    before the axis (``s0*s1//(s1//8)``) is then known to fill exactly what the input had."""
    before, after = _key(src[:a]), _key(src[a + 1:])
    for b in range(len(dst)):
        if same_dim(dst[b], src[a]) and (_key(dst[:b]) == before or _key(dst[b + 1:]) == after):
            return b
    return None


def reshape_links(op: Operator) -> list[Link]:
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    if x is None or y is None:
        return []
    links = []
    for a in range(len(x)):
        b = reshape_axis(x, a, y)
        if b is not None:
            links.append(_link(0, a, 0, b))
    return links


def _rank(opd: Operand) -> int | None:
    return None if opd.shape is None else len(opd.shape)


@layout_rule("pnnx.Output", "Tensor.size", "Tensor.numel", "Output")
def _neutral(op):
    return OpLayout(neutral=True)


# ----------------------------------------------------------------------------- elementwise
ELEMENTWISE = ("pnnx.Expression", "F.relu", "F.relu6", "F.gelu", "F.silu", "F.sigmoid", "F.tanh", "F.hardswish",
               "F.hardsigmoid", "F.elu", "F.leaky_relu", "F.mish", "F.selu", "F.celu", "F.softplus", "F.hardtanh",
               "F.logsigmoid", "torch.clamp", "F.dropout", "F.hardshrink", "F.softshrink", "F.softsign",
               "F.tanhshrink", "F.threshold", "torch.where", "Tensor.to", "Tensor.type_as", "torch.abs", "torch.neg",
               "torch.exp", "torch.log", "torch.sqrt", "torch.rsqrt", "torch.sin", "torch.cos", "torch.tan",
               "torch.floor", "torch.ceil", "torch.round", "torch.trunc", "torch.sign", "torch.erf",
               "torch.reciprocal", "torch.square", "torch.maximum", "torch.minimum", "torch.pow", "torch.atan2",
               "torch.logical_not", "torch.logical_and", "torch.logical_or", "torch.logical_xor", "torch.eq",
               "torch.ne", "torch.lt", "torch.le", "torch.gt", "torch.ge", "torch.bitwise_not",
               "torch.bitwise_and", "torch.bitwise_or", "torch.bitwise_xor")


@layout_rule(*ELEMENTWISE)
def _elementwise(op):
    return OpLayout(broadcast_links(op))


# ----------------------------------------------------------------------------- reshapes and moves
@layout_rule("Tensor.reshape", "Tensor.view", "torch.flatten", "torch.squeeze", "torch.unsqueeze",
             "Tensor.reshape_as", "Tensor.unflatten")
def _reshape(op):
    return OpLayout(reshape_links(op), free=True)


@layout_rule("Tensor.permute", "torch.permute", "torch.transpose", "torch.t")
def _permute(op):
    rank = _rank(op.inputs[0])
    if rank is None:
        return None
    if op.type == "torch.transpose" or op.type == "torch.t":
        dims = list(range(rank))
        if rank >= 2:
            d0 = _norm(int(op.params.get("dim0", 0)), rank)
            d1 = _norm(int(op.params.get("dim1", 1)), rank)
            dims[d0], dims[d1] = dims[d1], dims[d0]
    else:
        dims = [_norm(int(d), rank) for d in op.params["dims"]]
    return OpLayout([_link(0, src, 0, dst) for dst, src in enumerate(dims)])


# ----------------------------------------------------------------------------- along a dim
def _along(op, key: str = "dim"):
    rank = _rank(op.inputs[0])
    if rank is None:
        return None
    dims = _dims_param(op, key, rank)
    if dims is None:
        return OpLayout()
    return OpLayout(identity_links(op, skip=dims))


@layout_rule("F.softmax", "F.log_softmax", "torch.cumsum", "torch.cumprod", "torch.index_select", "F.glu",
             "torch.argsort", "torch.sort", "F.normalize", "torch.logcumsumexp")
def _along_dim(op):
    layout = _along(op, "dim")
    if layout is not None and len(op.outputs) > 1:  # sort: values and indices
        layout.links += [_link(ln.i, ln.a, k, ln.b) for k in range(1, len(op.outputs)) for ln in list(layout.links)]
    return layout


@layout_rule("torch.flip", "torch.roll")
def _along_dims(op):
    return _along(op, "dims")


@layout_rule("Tensor.slice")
def _slice(op):
    rank = _rank(op.inputs[0])
    if rank is None:
        return None
    skip = _dims_param(op, "dims", rank) or _dims_param(op, "dim", rank) or []
    return OpLayout(identity_links(op, skip=skip))


@layout_rule("Tensor.select")
def _select(op):
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    if x is None or y is None:
        return None
    d = _norm(int(op.params["dim"]), len(x))
    return OpLayout([_link(0, a, 0, a - (a > d)) for a in range(len(x)) if a != d and same_dim(x[a], y[a - (a > d)])])


@layout_rule("torch.cat", "torch.concat")
def _cat(op):
    y = _shape(op.outputs[0])
    if y is None:
        return None
    d = _norm(int(op.params.get("dim", 0)), len(y))
    links = []
    for i, x in enumerate(op.inputs):
        s = _shape(x)
        if s is None or len(s) != len(y):
            continue
        links += [_link(i, a, 0, a) for a in range(len(y)) if a != d and same_dim(s[a], y[a])]
    return OpLayout(links, exact=True)


def _one_axis_more(big: Sequence[Dim], d: int, smalls: Sequence[Operand], big_is_output: bool) -> list[Link]:
    """Links between tensors without axis ``d`` (``smalls``: the inputs of a stack, the outputs
    of an unbind) and the tensor ``big`` that has it: axis ``a`` of a small one is axis
    ``a + (a >= d)`` of the big one."""
    links = []
    for j, o in enumerate(smalls):
        s = _shape(o)
        if s is None or len(s) + 1 != len(big):
            continue
        for a in range(len(s)):
            b = a + (a >= d)
            if same_dim(s[a], big[b]):
                links.append(_link(j, a, 0, b) if big_is_output else _link(0, b, j, a))
    return links


@layout_rule("torch.stack")
def _stack(op):
    y = _shape(op.outputs[0])
    if y is None:
        return None
    return OpLayout(_one_axis_more(y, _norm(int(op.params.get("dim", 0)), len(y)), op.inputs, True))


@layout_rule("torch.chunk", "torch.split", "torch.tensor_split")
def _split(op):
    rank = _rank(op.inputs[0])
    if rank is None:
        return None
    d = _norm(int(op.params.get("dim", 0)), rank)
    return OpLayout([ln for k in range(len(op.outputs)) for ln in identity_links(op, 0, k, skip=[d])])


@layout_rule("torch.unbind")
def _unbind(op):
    x = _shape(op.inputs[0])
    if x is None:
        return None
    return OpLayout(_one_axis_more(x, _norm(int(op.params.get("dim", 0)), len(x)), op.outputs, False))


@layout_rule("Tensor.repeat", "F.pad", "torch.tile")
def _resize_some(op):
    """Axes whose size the op keeps (repeat of 1, not padded) are untouched."""
    return OpLayout(broadcast_links(op, inputs=[0]))


@layout_rule("Tensor.expand", "Tensor.expand_as")
def _expand(op):
    """Kept axes link; so does a 1 expanded along what becomes a batch axis: the blob stays one
    sample (n = 1) that ncnn broadcasts over the batch where it meets a batched value."""
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    if x is None or y is None or len(x) > len(y):
        return None
    off = len(y) - len(x)
    return OpLayout([_link(0, a, 0, a + off) for a in range(len(x)) if same_dim(x[a], y[a + off]) or x[a] == 1])


# ----------------------------------------------------------------------------- reductions
@layout_rule("torch.sum", "torch.mean", "torch.amax", "torch.amin", "torch.max", "torch.min", "torch.prod",
             "torch.var", "torch.std", "torch.logsumexp", "torch.norm", "torch.argmax", "torch.argmin",
             "torch.any", "torch.all", "torch.count_nonzero")
def _reduce(op):
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    if x is None or y is None:
        return None
    dims = _dims_param(op, "dim", len(x))
    if dims is None:
        return OpLayout()
    keep = len(y) == len(x)
    links = []
    for a in range(len(x)):
        if a in dims:
            continue
        b = a if keep else a - sum(1 for d in dims if d < a)
        if b < len(y) and same_dim(x[a], y[b]):
            links += [_link(0, a, k, b) for k in range(len(op.outputs))]
    return OpLayout(links)


# ----------------------------------------------------------------------------- products and norms
@layout_rule("nn.Linear", "F.linear", "nn.LayerNorm", "F.layer_norm", "nn.RMSNorm", "F.rms_norm")
def _last_dims(op):
    """Computed along the last dim(s) only (normalized_shape for the norms)."""
    x = _shape(op.inputs[0])
    if x is None:
        return None
    n = 1
    if op.type in ("nn.LayerNorm", "F.layer_norm", "nn.RMSNorm", "F.rms_norm"):
        ns = op.params.get("normalized_shape")
        n = len(ns) if isinstance(ns, (list, tuple)) else 1
    return OpLayout(identity_links(op, skip=range(len(x) - n, len(x))))


@layout_rule("nn.RotaryEmbed")
def _rotary(op):
    """Each head rotates on its own: the dims before ``(L, E)`` link through (L reads its row of
    the cos/sin tables)."""
    x = _shape(op.inputs[0])
    if x is None:
        return None
    return OpLayout(identity_links(op, skip=range(max(len(x) - 2, 0), len(x))))


@layout_rule("torch.matmul", "torch.bmm", "torch.mm")
def _matmul(op):
    """Leading (stacked) dims link through; so does the row axis M of a matrix ``a`` (the column
    axis N of a matrix ``b``): a sample is then a vector, which ncnn's MatMul multiplies as one
    row (column). Not with leading dims: the sample would lose its unit M (N) dim and ncnn would
    take a stacked dim for it."""
    a, b, y = _shape(op.inputs[0]), _shape(op.inputs[1]), _shape(op.outputs[0])
    if a is None or b is None or y is None or (len(a) < 2 and len(b) < 2):
        return None
    if len(b) == 1:  # (..., M, K) @ (K,) → (..., M)
        return OpLayout([_link(0, d, 0, d) for d in range(len(a) - 1) if same_dim(a[d], y[d])])
    if len(a) == 1:  # (K,) @ (..., K, N) → (..., N)
        return OpLayout([_link(1, d, 0, d) for d in range(len(b) - 2) if same_dim(b[d], y[d])])
    lead = len(y) - 2
    links = []
    for i, s in ((0, a), (1, b)):
        off = lead - (len(s) - 2)
        links += [_link(i, d, 0, d + off) for d in range(len(s) - 2) if same_dim(s[d], y[d + off])]
    if len(a) == 2 and same_dim(a[0], y[-2]):
        links.append(_link(0, 0, 0, len(y) - 2))
    if len(b) == 2 and same_dim(b[1], y[-1]):
        links.append(_link(1, 1, 0, len(y) - 1))
    return OpLayout(links)


# ----------------------------------------------------------------------------- batch-first layers
#: pnnx types whose ncnn layer takes one sample of fixed rank: input 0 (and output 0) of the
#: given torch rank has its batch at dim 0 (a lower rank is already one unbatched sample)
BATCH_FIRST = {
    "nn.Conv1d": 3, "nn.Conv2d": 4, "nn.Conv3d": 5, "F.conv1d": 3, "F.conv2d": 4, "F.conv3d": 5,
    "nn.ConvTranspose1d": 3, "nn.ConvTranspose2d": 4, "nn.ConvTranspose3d": 5,
    "F.conv_transpose1d": 3, "F.conv_transpose2d": 4, "F.conv_transpose3d": 5,
    "F.max_pool1d": 3, "F.max_pool2d": 4, "F.max_pool3d": 5, "F.avg_pool1d": 3, "F.avg_pool2d": 4,
    "F.avg_pool3d": 5, "F.adaptive_avg_pool1d": 3, "F.adaptive_avg_pool2d": 4, "F.adaptive_avg_pool3d": 5,
    "F.adaptive_max_pool1d": 3, "F.adaptive_max_pool2d": 4, "F.adaptive_max_pool3d": 5, "F.lp_pool1d": 3,
    "F.lp_pool2d": 4, "F.pixel_shuffle": 4, "F.pixel_unshuffle": 4,
    "F.local_response_norm": 4, "F.fold": 3, "F.unfold": 4, "F.affine_grid": 3,
    "torchvision.ops.deform_conv2d": 4,
}
#: batch-first at any rank ≥ 2 (the channel axis 1 must be ncnn's outermost)
BATCH_FIRST_ANY = ("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d", "F.batch_norm", "nn.InstanceNorm1d",
                   "nn.InstanceNorm2d", "nn.InstanceNorm3d", "F.instance_norm", "nn.GroupNorm", "F.group_norm",
                   "nn.PReLU", "F.prelu", "F.interpolate", "F.upsample", "nn.Upsample", "nn.ChannelShuffle")


def _batch_first(op, rank: int | None):
    x = _shape(op.inputs[0])
    if x is None:
        return None
    measured = frozenset(range(1, len(op.inputs))) if "size_expr" in op.params else frozenset()
    if rank is not None and len(x) != rank or rank is None and len(x) < 2:
        return OpLayout(measured=measured)  # one unbatched sample: nothing links
    return OpLayout([_link(0, 0, 0, 0)], required={0: 0}, required_out={0: 0}, measured=measured)


for _t, _r in BATCH_FIRST.items():
    layout_rule(_t)(lambda op, _r=_r: _batch_first(op, _r))
layout_rule(*BATCH_FIRST_ANY)(lambda op: _batch_first(op, None))


@layout_rule("torchvision.ops.DeformConv2d")
def _deform_conv(op):
    """Input, offset and mask (N, C, H, W) are read sample by sample: all batch-first."""
    if any(_rank(x) != 4 for x in op.inputs) or _rank(op.outputs[0]) != 4:
        return OpLayout()
    n = len(op.inputs)
    return OpLayout([_link(i, 0, 0, 0) for i in range(n)], required={i: 0 for i in range(n)}, required_out={0: 0})


@layout_rule("F.grid_sample")
def _grid_sample(op):
    """Input (N, C, H, W) and grid (N, H', W', 2) sample by sample: both batch-first."""
    x, g = _shape(op.inputs[0]), _shape(op.inputs[1]) if len(op.inputs) > 1 else None
    if x is None or g is None or len(x) not in (4, 5) or len(g) != len(x):
        return OpLayout()
    return OpLayout([_link(0, 0, 0, 0), _link(1, 0, 0, 0)], required={0: 0, 1: 0}, required_out={0: 0})


@layout_rule("torch.stft", "torch.istft")
def _spectral(op):
    """ncnn's Spectrogram / InverseSpectrogram take one signal / spectrum: a batch of them
    (a 2-D signal, a 2-D output signal) is batch-first."""
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    signal = x if op.type == "torch.stft" else y
    if signal is None or len(signal) != 2:
        return OpLayout()
    return OpLayout([_link(0, 0, 0, 0)], required={0: 0}, required_out={0: 0})


@layout_rule("torch.view_as_real", "torch.view_as_complex")
def _complex_view(op):
    """A complex tensor and its real layout (a trailing axis of 2): the leading dims are the same."""
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    if x is None or y is None:
        return None
    return OpLayout([_link(0, d, 0, d) for d in range(min(len(x), len(y))) if same_dim(x[d], y[d])])


@layout_rule("torch.diagonal")
def _diagonal(op):
    """The diagonal of two dims; the other dims come first in the output, in order."""
    rank = _rank(op.inputs[0])
    if rank is None:
        return None
    diag = {_norm(int(op.params.get(k, d)), rank) for k, d in (("dim1", 0), ("dim2", 1))}
    rest = [d for d in range(rank) if d not in diag]
    links = [_link(0, d, 0, b) for b, d in enumerate(rest)]
    if len(rest) == 1 and rank == 3:  # ncnn's Diag takes a 2-D blob: the third dim is the batch
        return OpLayout(links, required={0: rest[0]}, required_out={0: 0})
    return OpLayout(links)


@layout_rule("nn.Embedding", "F.embedding")
def _embedding(op):
    x, y = _shape(op.inputs[0]), _shape(op.outputs[0])
    if x is None or y is None:
        return None
    if len(x) == 2:  # (N, L) token ids: ncnn's Embed takes the L ids of one sequence
        return OpLayout([_link(0, 0, 0, 0)], required={0: 0}, required_out={0: 0})
    return OpLayout([_link(0, a, 0, a) for a in range(len(x)) if same_dim(x[a], y[a])])


@layout_rule("F.scaled_dot_product_attention")
def _sdpa(op):
    """(N, ..., L, E) attention with the batch first (ncnn's SDPA merges the other leading dims
    into heads)."""
    q = _shape(op.inputs[0])
    if q is None or len(q) < 4:
        return None
    required = {i: 0 for i in range(min(3, len(op.inputs))) if _rank(op.inputs[i]) == len(q)}
    links = [_link(i, 0, 0, 0) for i in required]
    if len(op.inputs) > 3 and _rank(op.inputs[3]) == len(q) and same_dim(_shape(op.inputs[3])[0], q[0]):
        required[3] = 0
        links.append(_link(3, 0, 0, 0))
    return OpLayout(links, required=required, required_out={0: 0})


@layout_rule("nn.MultiheadAttention")
def _mha(op):
    """The fused attention (``fuse_multihead_attention``) reads the tokens of one sample in
    order: the query's axes are the output's; a key/value axis only links where it is a 1."""
    y = _shape(op.outputs[0])
    if y is None:
        return None
    links = identity_links(op, 0, 0)
    for i in (1, 2):
        s = _shape(op.inputs[i]) if i < len(op.inputs) else None
        if s is not None and len(s) == len(y):
            links += [_link(i, a, 0, a) for a in range(len(s)) if s[a] == 1 and y[a] == 1]
    return OpLayout(links)


@layout_rule("nn.LSTM", "nn.GRU", "nn.RNN")
def _recurrent(op):
    x = _shape(op.inputs[0])
    if x is None or len(x) != 3:
        return None
    b = 0 if op.params.get("batch_first") else 1
    required = {0: b}
    links = [_link(0, b, 0, b)]
    required_out = {0: b}
    for i in range(1, len(op.inputs)):  # initial states (layers * directions, N, width)
        if _rank(op.inputs[i]) == 3:
            required[i] = 1
            links.append(_link(i, 1, 0, b))
    for k in range(1, len(op.outputs)):  # final states
        if _rank(op.outputs[k]) == 3:
            required_out[k] = 1
            links.append(_link(0, b, k, 1))
    return OpLayout(links, required=required, required_out=required_out)


@layout_rule("nn.LSTMCell", "nn.GRUCell", "nn.RNNCell")
def _cell(op):
    x = _shape(op.inputs[0])
    if x is None or len(x) != 2:
        return None
    required = {i: 0 for i in range(len(op.inputs)) if _rank(op.inputs[i]) == 2}
    links = [_link(i, 0, k, 0) for i in required for k in range(len(op.outputs))]
    return OpLayout(links, required=required, required_out={k: 0 for k in range(len(op.outputs))})


def numel(shape: Sequence[Dim]) -> int | None:
    return math.prod(shape) if all(isinstance(d, int) for d in shape) else None
