"""fold_constants on hand-written ATen graphs, and end to end through the harness."""
import numpy as np
import pytest
import torch
import torch.nn as nn

import engine.convert  # noqa: F401  (engine.passes imported first is a circular import)
from engine.ir import Attribute, Graph
from engine.passes import fold_constants
from tests.harness import DIALECTS, Fn, check_module


def _graph(body: str, **weights) -> Graph:
    lines = [ln.strip() for ln in body.strip().splitlines()]
    g = Graph.from_text("7767517\n%d 0\n" % len(lines) + "\n".join(lines) + "\n")
    for op in g.ops:
        if op.type.startswith(("aten.", "_operator.", "torch.")):
            op.meta["target"] = op.type
    for name, arr in weights.items():
        g.find_op(name).attrs["data"] = Attribute(np.asarray(arr))
    return g


def _run(g: Graph) -> Graph:
    fold_constants.run(g, None)
    g.lint()
    return g


def _const(g: Graph, operand: str):
    p = g.operands[operand].producer
    assert p.type == "pnnx.Attribute", f"{operand} produced by {p.type}"
    return p.attrs["data"].data


def test_folds_weight_arithmetic_lazily():
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,3,2)f32
        pnnx.Attribute w 0 1 w @data=(2,3)f32 #w=(2,3)f32
        aten.permute.default t 1 1 w t dims=(1,0) $self=w #t=(3,2)f32
        aten.mul.Tensor s 1 1 t s other=2 $self=t #s=(3,2)f32
        aten.add.Tensor y 2 1 x s y alpha=1 $self=x $other=s #y=(1,3,2)f32
        pnnx.Output out 1 0 y
    """, w=w)
    loads = []
    real = g.find_op("w").attrs["data"]
    g.find_op("w").attrs["data"] = Attribute(loader=lambda: loads.append(1) or real.data, shape=(2, 3), dtype="f32")
    _run(g)
    assert [op.type for op in g.ops] == ["pnnx.Input", "pnnx.Attribute", "pnnx.Attribute", "pnnx.Attribute",
                                         "aten.add.Tensor", "pnnx.Output"]
    s = g.find_op("s")
    assert s.type == "pnnx.Attribute" and s.meta["folded_from"] == "aten.mul.Tensor"
    assert s.outputs[0].name == "s" and s.outputs[0].shape == [3, 2]
    assert not loads, "folding read the weight before it was needed"
    np.testing.assert_array_equal(s.attrs["data"].data, w.T * 2)
    assert s.attrs["data"].data.dtype == np.float32
    assert g.find_op("y").inputs[1] is s.outputs[0]


def test_static_shape_arithmetic_becomes_python_constants():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,4,6,8)f32
        aten.sym_size.int n 1 1 x n dim=3 $self=x #n=()i64
        _operator.mul m 1 1 n m a="%n" b=3 $a=n #m=()i64
        _operator.floordiv q 1 1 m q a="%m" b=2 $a=m #q=()i64
        aten.view.default v 2 1 x q v size=(1,4,6,"%q") $self=x $size.3=q #v=(1,4,6,12)f32
        pnnx.Output out 1 0 v
    """)
    _run(g)
    assert g.operands["q"].meta["const"] == 12
    assert isinstance(g.operands["q"].meta["const"], int)
    assert g.find_op("q").type == "pnnx.Attribute"
    assert g.find_op("v").type == "aten.view.default"  # x is not constant


def test_symbolic_dims_fold_only_when_bound():
    text = """
        pnnx.Input x 0 1 x #x=(1,4,s0,8)f32
        aten.sym_size.int n 1 1 x n dim=2 $self=x #n=()i64
        aten.mul.Tensor y 2 1 x n y $self=x $other=n other="%n" #y=(1,4,s0,8)f32
        pnnx.Output out 1 0 y
    """
    g = _run(_graph(text))
    assert g.find_op("n").type == "aten.sym_size.int"
    g = _graph(text)
    g.meta["symbol_values"] = {"s0": 5}
    _run(g)
    assert g.operands["n"].meta["const"] == 5


def test_scalar_tensor_creation_and_chain():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,4)f32
        aten.full.default z 0 1 z size=() fill_value=0 dtype=float32 #z=()f32
        aten.arange.start_step r 0 1 r start=0 end=4 step=1 #r=(4)i64
        aten.mul.Tensor r2 1 1 r r2 other=0.5 $self=r #r2=(4)f32
        aten.add.Tensor a 2 1 z r2 a alpha=1 $self=z $other=r2 #a=(4)f32
        aten.minimum.default y 2 1 a x y $self=a $other=x #y=(1,4)f32
        pnnx.Output out 1 0 y
    """)
    _run(g)
    assert _const(g, "z").shape == ()
    np.testing.assert_allclose(_const(g, "a"), [0, 0.5, 1, 1.5])
    assert _const(g, "a").dtype == np.float32
    assert g.find_op("y").type == "aten.minimum.default"


def test_not_folded():
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,4)f32
        pnnx.Attribute c 0 1 c @data=(1,1)f32 #c=(1,1)f32
        aten.expand.default big 1 1 c big size=(512,512) $self=c #big=(512,512)f32
        aten.empty.memory_format e 0 1 e size=(4) #e=(4)f32
        aten.relu.default r 1 1 x r $self=x #r=(1,4)f32
        aten.add.Tensor y 2 1 r e y alpha=1 $self=r $other=e #y=(1,4)f32
        aten.add.Tensor y2 2 1 y big y2 alpha=1 $self=y $other=big #y2=(512,512)f32
        pnnx.Output out 1 0 y2
    """, c=np.ones((1, 1), np.float32))
    _run(g)
    assert g.find_op("big").type == "aten.expand.default"  # 262144× growth: broadcast at run time
    assert g.find_op("e").type == "aten.empty.memory_format"  # uninitialised: never folded
    assert g.find_op("r").type == "aten.relu.default"


def test_cat_and_views_of_constants():
    a, b = np.ones((2, 2), np.float32), np.full((1, 2), 3, np.float32)
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,3,2)f32
        pnnx.Attribute a 0 1 a @data=(2,2)f32 #a=(2,2)f32
        pnnx.Attribute b 0 1 b @data=(1,2)f32 #b=(1,2)f32
        aten.cat.default c 2 1 a b c dim=0 $tensors.0=a $tensors.1=b #c=(3,2)f32
        aten.unsqueeze.default u 1 1 c u dim=0 $self=c #u=(1,3,2)f32
        aten.mul.Tensor y 2 1 x u y $self=x $other=u #y=(1,3,2)f32
        pnnx.Output out 1 0 y
    """, a=a, b=b)
    _run(g)
    np.testing.assert_array_equal(_const(g, "u"), np.concatenate([a, b])[None])


class Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 2.0, 4))
        self.register_buffer("shift", torch.randn(4, 4))

    def forward(self, x):
        s = (self.scale * 2 - 1).view(1, 4, 1, 1)
        return x * s + self.shift.t().sum(1).reshape(1, 4, 1, 1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_buffer_arithmetic_end_to_end(tmp_path, dialect):
    """Computations on buffers fold into two constants (the sum stays: not in the table)."""
    r = check_module(Buffers(), [torch.randn(1, 4, 3, 3)], tmp_path, dialect=dialect)
    kinds = [op.type for op in r.result.ncnn.ops]
    assert kinds.count("BinaryOp") == 2, kinds


def test_products_and_gathers_of_constants_fold_up_to_a_mebibyte():
    """Swin V2's position-bias MLP: a (1, 15, 15, 2) table times a (512, 2) weight is 115,200
    elements from inputs of at most 1,024 (a 112x growth no broadcast rule would allow), then a
    gather; all of it folds and matches numpy. A broadcast of that growth still does not fold."""
    rng = np.random.default_rng(0)
    table, w1 = rng.standard_normal((1, 15, 15, 2), np.float32), rng.standard_normal((512, 2), np.float32)
    b1, w2 = rng.standard_normal(512, np.float32), rng.standard_normal((3, 512), np.float32)
    index = rng.integers(0, 225, 4096)
    g = _graph("""
        pnnx.Input x 0 1 x #x=(1,3,64,64)f32
        pnnx.Attribute table 0 1 table @data=(1,15,15,2)f32 #table=(1,15,15,2)f32
        pnnx.Attribute w1 0 1 w1 @data=(512,2)f32 #w1=(512,2)f32
        pnnx.Attribute b1 0 1 b1 @data=(512)f32 #b1=(512)f32
        pnnx.Attribute w2 0 1 w2 @data=(3,512)f32 #w2=(3,512)f32
        pnnx.Attribute index 0 1 index @data=(4096)i64 #index=(4096)i64
        aten.linear.default h 3 1 table w1 b1 h $input=table $weight=w1 $bias=b1 #h=(1,15,15,512)f32
        aten.relu.default r 1 1 h r $self=h #r=(1,15,15,512)f32
        aten.linear.default o 2 1 r w2 o $input=r $weight=w2 #o=(1,15,15,3)f32
        aten.view.default v 1 1 o v size=(-1,3) $self=o #v=(225,3)f32
        aten.index.Tensor g 2 1 v index g $self=v $indices.0=index #g=(4096,3)f32
        aten.view.default gv 1 1 g gv size=(64,64,3) $self=g #gv=(64,64,3)f32
        aten.permute.default p 1 1 gv p dims=(2,0,1) $self=gv #p=(3,64,64)f32
        aten.add.Tensor y 2 1 x p y alpha=1 $self=x $other=p #y=(1,3,64,64)f32
        pnnx.Output out 1 0 y
    """, table=table, w1=w1, b1=b1, w2=w2, index=index)
    _run(g)
    want = (np.maximum(table @ w1.T + b1, 0) @ w2.T).reshape(-1, 3)[index].reshape(64, 64, 3).transpose(2, 0, 1)
    np.testing.assert_allclose(_const(g, "p"), want, rtol=1e-5, atol=1e-5)
    assert g.find_op("y").type == "aten.add.Tensor"


def test_an_integer_value_deep_in_a_long_chain_does_not_exhaust_the_stack():
    """Integer and bool values fold whatever their size, so the pass walks back from them to see
    whether everything they depend on is constant. In core ATen ViT-H/14 that walk went through
    thousands of ops and recursed past Python's limit (RecursionError); it is iterative now."""
    lines = ["pnnx.Input x 0 1 x #x=(1,4)f32",
             "pnnx.Attribute c 0 1 c @data=(1,4)f32 #c=(1,4)f32"]
    prev = "x"
    for k in range(3000):
        lines.append(f"aten.relu.default r{k} 1 1 {prev} r{k} $self={prev} #r{k}=(1,4)f32")
        prev = f"r{k}"
    lines += [f"aten._to_copy.default i 1 1 {prev} i dtype=4 $self={prev} #i=(1,4)i64",
              "aten._to_copy.default ci 1 1 c ci dtype=4 $self=c #ci=(1,4)i64",
              "aten.add.Tensor y 2 1 i ci y alpha=1 $self=i $other=ci #y=(1,4)i64",
              "pnnx.Output out 1 0 y"]
    g = _graph("\n".join(lines), c=np.full((1, 4), 2.5, np.float32))
    _run(g)
    assert g.find_op("i").type == "aten._to_copy.default"  # depends on the input: not constant
    assert _const(g, "ci").tolist() == [[2, 2, 2, 2]] and _const(g, "ci").dtype == np.int64


# ----------------------------------------------------------------------------- masks, windows, weight norm
class PackedCausalMask(nn.Module):
    """Hugging Face's causal mask with the packed-sequence check, from ``input_ids`` only: position
    ids from ``arange``, ``diff``/``ne``/``cumsum`` sequence ids, ``eq`` of them and ``le`` of
    positions, ``&``-combined, indexed with broadcast ``arange`` indices — a shape-only value."""

    def forward(self, x):
        n = x.shape[1]
        positions = torch.arange(n).unsqueeze(0)
        first = positions[:, :1] - 1
        seq = torch.cumsum(torch.diff(positions, prepend=first, dim=-1).ne(1), dim=-1)
        q, kv = torch.arange(n)[None, None, :, None], torch.arange(n)[None, None, None, :]
        b = torch.arange(1)[:, None, None, None]
        same = seq[b, q] == seq[b, kv]
        mask = torch.ones((), dtype=torch.bool) & (kv <= q) & same
        return torch.where(mask, x[:, None, :, :1] * 0 + 1.0, x[:, None, :, :1] * 0 - 2.0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_mask_of_arange_cumsum_eq_and_folds_to_pytorchs_constant(tmp_path, dialect):
    c = check_module(PackedCausalMask(), [torch.randn(1, 6, 3)], tmp_path, dialect=dialect)
    assert c.errors == [0.0]
    g = c.result.records[[r.name for r in c.result.records].index("fold_constants")]
    folded = Graph.from_text(g.snapshot)
    masks = [op for op in folded.ops if op.type == "pnnx.Attribute" and op.outputs[0].dtype == "bool"
             and op.outputs[0].shape == [1, 1, 6, 6]]
    assert masks, "the mask is one constant"
    want = np.tril(np.ones((6, 6), bool))[None, None]
    # the constant keeps the provenance of every ATen node folded into it
    replaced = {op.name for op in c.result.aten.ops if op.type.startswith("aten.")}
    prov = set(masks[-1].provenance.nodes)
    assert prov <= replaced and {"arange", "cumsum"} <= {n.rstrip("_0123456789") for n in prov}, prov
    assert len(prov) >= 10, prov
    value = _folded_value(c, masks[-1].name)
    np.testing.assert_array_equal(value, want)


def _folded_value(checked, name):
    """The value of a constant in the graph right after fold_constants (re-run the pipeline's
    first passes on the result's ATen graph)."""
    from engine.passes import PIPELINE, PassContext, PassManager

    upto = [p for p in PIPELINE][: [getattr(p, "pass_name", "") for p in PIPELINE].index("fold_constants") + 1]
    g = checked.result.aten.copy()
    PassManager(upto, snapshots=False).run(g, PassContext())
    return np.asarray(g.find_op(name).attrs["data"].data)


WINDOWS = {
    "hann": lambda n, p: torch.hann_window(n, periodic=p),
    "hamming": lambda n, p: torch.hamming_window(n, periodic=p),
    "hamming_ab": lambda n, p: torch.hamming_window(n, periodic=p, alpha=0.5, beta=0.4),
    "blackman": lambda n, p: torch.blackman_window(n, periodic=p),
    "bartlett": lambda n, p: torch.bartlett_window(n, periodic=p),
    "kaiser": lambda n, p: torch.kaiser_window(n, periodic=p, beta=8.0),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(WINDOWS))
@pytest.mark.parametrize("periodic", [True, False])
def test_window_functions_fold(tmp_path, dialect, name, periodic):
    c = check_module(Fn(lambda x: x * WINDOWS[name](16, periodic)), [torch.randn(1, 3, 16)], tmp_path,
                     dialect=dialect, tol=1e-6)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "MemoryData", "BinaryOp"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_weight_norm_of_parameters_folds(tmp_path, dialect):
    """Wav2Vec2's positional convolution: ``weight_norm`` over dim 2 of constant parameters."""
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 3, padding=1, groups=2), name="weight", dim=2)
    c = check_module(conv, [torch.randn(1, 4, 9)], tmp_path, dialect=dialect)
    assert [op.type for op in c.result.ncnn.ops] == ["Input", "ConvolutionDepthWise1D"] or \
        "Convolution1D" in [op.type for op in c.result.ncnn.ops]


def test_over_budget_fold_is_a_warning_naming_the_node(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    pt2 = export_pt2(Fn(lambda x: x + torch.ones(64, 64).tril().bool().float()), [torch.randn(1, 64, 64)],
                     tmp_path / "m.pt2")
    small = convert(str(pt2), ConvertOptions(fold_budget=1000))
    warnings = [d for d in small.diagnostics if d.severity == "warning" and d.stage == "fold_constants"]
    assert warnings and "4,096 elements" in warnings[0].reason and "fold_budget" in warnings[0].reason
    assert warnings[0].node and warnings[0].source
    assert convert(str(pt2), ConvertOptions()).ok


class ScatteredBias(nn.Module):
    """Swin3D's relative position bias in small: a (512, 32) table gathered at 128×128 scattered
    constant indices (thousands of runs: no ncnn gather of crops; a one-hot matrix of 8M: none
    of a matrix product), a 524,288-element value: over the 262,144 a computed constant folds
    to, and 32× its largest constant input."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.table = nn.Parameter(torch.randn(512, 32, generator=g))
        self.register_buffer("index", torch.randint(0, 512, (128 * 128,), generator=g))

    def forward(self, x):
        return x + self.table[self.index].view(128, 128, 32).permute(2, 0, 1) * 0.5


@pytest.mark.parametrize("dialect", DIALECTS)
def test_constant_no_rule_computes_at_run_time_is_folded_at_lowering(tmp_path, dialect):
    """Folding leaves a value far larger than its constant inputs for ncnn to compute at run
    time; when no rule can (the gather's runs), the lowering folds it after all, with a warning
    giving its size, and the model converts and matches PyTorch."""
    c = check_module(ScatteredBias(), [torch.randn(1, 32, 128, 128)], tmp_path, dialect=dialect)
    warnings = [d.reason for d in c.result.diagnostics if d.severity == "warning"]
    assert any("folded into a constant of 524,288 elements" in w and "no rule computes it" in w for w in warnings), \
        warnings


def test_late_fold_keeps_the_fold_budget(tmp_path):
    """Over the fold budget the lowering does not fold either: the op is reported, with why
    folding left it."""
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    pt2 = export_pt2(ScatteredBias(), [torch.randn(1, 32, 128, 128)], tmp_path / "m.pt2")
    r = convert(str(pt2), ConvertOptions(fold_budget=500_000))
    assert not r.ok
    reasons = [d.reason for d in r.errors]
    assert any("gather" in x and "over the fold budget (500,000)" in x for x in reasons), reasons


class StandardizedConv(torch.nn.Module):
    """timm's ScaledStdConv2d (NF-Nets): the weight standardised per output channel by a
    training-mode batch norm over the weight itself, scaled by a learnt gain."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(6, 3, 3, 3))
        self.gain = torch.nn.Parameter(torch.rand(6, 1, 1, 1) + 0.5)

    def forward(self, x):
        w = torch.nn.functional.batch_norm(self.weight.reshape(1, 6, -1), None, None,
                                           weight=(self.gain * 27 ** -0.5).view(-1), training=True, momentum=0.0,
                                           eps=1e-6).reshape_as(self.weight)
        return torch.nn.functional.conv2d(x, w, padding=1)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_training_mode_batch_norm_of_a_weight_folds(tmp_path, dialect):
    """Its batch statistics are the weight's: constant, folded (training dialect: batch_norm;
    core: _native_batch_norm_legit.no_stats and its statistics outputs), one Convolution left."""
    torch.manual_seed(0)
    checked = check_module(StandardizedConv(), [torch.randn(1, 3, 8, 8)], tmp_path, dialect=dialect, tol=1e-5)
    assert [op.type for op in checked.result.ncnn.ops] == ["Input", "Convolution"]
