"""Elementwise arithmetic and unary math: tensor–tensor broadcasting (inputs, constants and
computed values, including the shapes where ncnn's own BinaryOp rule differs from PyTorch's),
scalars on either side, alpha, rounding modes, pow, squeeze-and-excitation; both dialects."""
import numpy as np
import pytest
import torch
import torch.nn as nn

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, Fn, check_module, export_pt2, run_ncnn

OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
}


class WithConst(nn.Module):
    """``fn(x, c)`` with ``c`` a buffer (a constant of the exported program)."""

    def __init__(self, fn, const, first=False):
        super().__init__()
        self.fn, self.first = fn, first
        self.register_buffer("c", const)

    def forward(self, x):
        return self.fn(self.c, x) if self.first else self.fn(x, self.c)


def _r(*shape, positive=False):
    t = torch.randn(shape)
    return t.abs() + 0.5 if positive else t


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# ----------------------------------------------------------------------------- two inputs
INPUT_SHAPES = [
    ((1, 4, 5, 6), (1, 4, 5, 6)),
    ((1, 4, 5, 6), (1, 4, 1, 1)),
    ((1, 4, 5, 6), (1, 1, 5, 6)),
    ((1, 4, 5, 6), (1, 4, 5, 1)),
    ((1, 4, 5, 6), (1, 1, 1, 6)),
    ((1, 4, 1, 6), (1, 1, 5, 1)),
    ((1, 1, 1, 1), (1, 4, 5, 6)),
    ((1, 4, 5), (1, 4, 1)),
    ((1, 4, 5), (1, 1, 5)),
    ((1, 8), (1, 8)),
    ((1, 8), (1, 1)),
    ((1, 2, 3, 4, 5), (1, 2, 1, 4, 1)),
]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("a,b", INPUT_SHAPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_inputs_broadcast(tmp_path, dialect, a, b, op):
    check_module(Fn(OPS[op]), [_r(*a), _r(*b, positive=op == "div")], tmp_path, dialect=dialect,
                 expect_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("op", ["maximum", "minimum", "atan2"])
def test_maximum_minimum(tmp_path, dialect, op):
    check_module(Fn(OPS[op]), [_r(1, 4, 5, 6), _r(1, 4, 1, 6)], tmp_path, dialect=dialect, expect_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("w", [6, 4])  # W == C is where ncnn's implicit 1-D rule would pick channels
def test_unbatched_1d_input_along_width(tmp_path, dialect, w):
    check_module(Fn(torch.mul), [_r(1, 4, 5, w), _r(w)], tmp_path, dialect=dialect, batched=[True, False])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lower_rank_computed_operand(tmp_path, dialect):
    """``x * x.mean(1)``: a (1, H, W) value against (1, C, H, W) — its size-1 batch axis lines
    up with channels; ncnn alone would align its rows with channels."""
    c = check_module(Fn(lambda x: x * x.mean(1)), [_r(1, 4, 5, 6)], tmp_path, dialect=dialect,
                     expect_types=["BinaryOp"])
    types = [op.type for op in c.result.ncnn.ops]
    assert sum(types.count(t) for t in ("ExpandDims", "Reshape")) == 1, types  # one layer lines it up


# ----------------------------------------------------------------------------- constants
CONST_SHAPES = [(4, 1, 1), (1, 4, 1, 1), (6,), (5, 6), (1, 1, 5, 6), (4, 5, 6), (4, 5, 1), (1, 1, 1, 6), (1,), ()]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", CONST_SHAPES, ids=str)
@pytest.mark.parametrize("first", [False, True])
def test_constant_operand(tmp_path, dialect, shape, first):
    check_module(WithConst(torch.sub, _r(*shape), first), [_r(1, 4, 5, 6)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape", [(4,), (1, 4), (5, 4), (4, 1, 4)], ids=str)
def test_constant_where_width_equals_channels(tmp_path, dialect, shape):
    """(1, 4, 5, 4) against a constant whose last dim is 4: must broadcast along W."""
    check_module(WithConst(torch.mul, _r(*shape)), [_r(1, 4, 5, 4)], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("x,c", [((1, 6, 8), (8,)), ((1, 6, 8), (6, 1)), ((1, 8), (8,)), ((1, 8), (1, 8))], ids=str)
def test_constant_lower_ranks(tmp_path, dialect, x, c):
    check_module(WithConst(torch.add, _r(*c)), [_r(*x)], tmp_path, dialect=dialect)


# ----------------------------------------------------------------------------- scalars
SCALAR_FNS = {
    "x+2": lambda x: x + 2, "2+x": lambda x: 2 + x, "x-1.5": lambda x: x - 1.5, "1-x": lambda x: 1 - x,
    "x*3": lambda x: x * 3, "0.5*x": lambda x: 0.5 * x, "x/4": lambda x: x / 4, "2/x": lambda x: 2 / x,
    "x**2": lambda x: x ** 2, "x**3": lambda x: x ** 3, "x**0.5": lambda x: x ** 0.5, "x**-1.5": lambda x: x ** -1.5,
    "2**x": lambda x: 2 ** x, "max(x,1)": lambda x: torch.clamp_min(x, 1) * torch.maximum(x, torch.tensor(1.0)),
    "rsub": lambda x: torch.rsub(x, 3), "add_alpha": lambda x: torch.add(x, 2, alpha=3),
    "x*tensor(2)": lambda x: x * torch.tensor(2.0), "x//2": lambda x: torch.div(x, 2, rounding_mode="floor"),
    "trunc_div": lambda x: torch.div(x, 3, rounding_mode="trunc"), "fmod": lambda x: torch.fmod(x, 1.5),
    "remainder": lambda x: torch.remainder(x - 3, 1.5), "rremainder": lambda x: torch.remainder(2.5, x - 3),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(SCALAR_FNS))
def test_scalar_operand(tmp_path, dialect, name):
    r = check_module(Fn(SCALAR_FNS[name]), [_r(1, 4, 5, 6, positive=True) * 3], tmp_path, dialect=dialect)
    assert "MemoryData" not in [op.type for op in r.result.ncnn.ops]


# ------------------------------------------------------------- integer division of exact multiples
#: every element an exact multiple of its divisor, or one off it, at positions past the last full
#: vector too (30 values): where ncnn's division goes through a reciprocal (its x86 wheel on an
#: AVX-512 machine gives 6 / 6 = 0.99999994 there), floor(a / b) comes out one too low
DIVISIONS = {
    "floor_divide": lambda a, b: torch.floor_divide(a, b), "floor_divide_6": lambda a, b: torch.floor_divide(a, 6),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_trunc_-6": lambda a, b: torch.div(a, -6, rounding_mode="trunc"),
    "remainder": lambda a, b: torch.remainder(a, b), "remainder_6": lambda a, b: torch.remainder(a, 6),
    "remainder_-6": lambda a, b: torch.remainder(a, -6), "rfloor_divide": lambda a, b: torch.floor_divide(42, b),
    "int64": lambda a, b: torch.remainder(a.long(), b.long()) + torch.div(a.long(), 6, rounding_mode="floor"),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(DIVISIONS))
def test_integer_division_of_exact_multiples_is_exact(tmp_path, dialect, name):
    k = torch.arange(-15, 15, dtype=torch.float32)
    b = torch.tensor([6.0, -6.0, 3.0, 7.0, -2.0, 1.0] * 5)
    a = k * b + torch.tensor([0.0, 0.0, 0.0, 1.0, -1.0, 0.0] * 5)
    c = check_module(Fn(lambda a, b: DIVISIONS[name](a, b).float()), [a[None], b[None]], tmp_path, dialect=dialect)
    assert max(c.errors) == 0.0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_pow_square_is_unaryop(tmp_path, dialect):
    r = check_module(Fn(lambda x: x ** 2 + x.pow(0.5)), [_r(1, 4, 5, 6, positive=True)], tmp_path, dialect=dialect)
    assert [op.type for op in r.result.ncnn.ops].count("UnaryOp") == 2


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("exponent", [3, 4.0, -2, 0])
def test_integer_powers_of_negative_numbers(tmp_path, dialect, exponent):
    """ncnn's POW is exp(b * log(a)), NaN for a negative a: integer powers are products."""
    r = check_module(Fn(lambda x: x.pow(exponent)), [torch.tensor([[-2.0, -0.5, 0.5, 3.0, -1.25]])], tmp_path,
                     dialect=dialect, tol=1e-6)
    assert not any(op.type == "BinaryOp" and op.params.get(0) == 6 for op in r.result.ncnn.ops)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_pow_tensor_tensor(tmp_path, dialect):
    check_module(Fn(torch.pow), [_r(1, 4, 5, 6, positive=True), _r(1, 4, 1, 1)], tmp_path, dialect=dialect,
                 expect_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("alpha", [2, 0.5, -1])
def test_alpha(tmp_path, dialect, alpha):
    check_module(Fn(lambda x, y: torch.add(x, y, alpha=alpha) + torch.sub(x, y, alpha=alpha)),
                 [_r(1, 4, 5, 6), _r(1, 4, 5, 6)], tmp_path, dialect=dialect)


# ----------------------------------------------------------------------------- unary math
UNARY = {
    "neg": (torch.neg, False), "abs": (torch.abs, False), "sqrt": (torch.sqrt, True), "rsqrt": (torch.rsqrt, True),
    "exp": (torch.exp, False), "log": (torch.log, True), "reciprocal": (torch.reciprocal, True),
    "square": (torch.square, False), "floor": (torch.floor, False), "ceil": (torch.ceil, False),
    "round": (torch.round, False), "trunc": (torch.trunc, False), "sign": (torch.sign, False),
    "sin": (torch.sin, False), "cos": (torch.cos, False), "atan": (torch.atan, False), "erf": (torch.erf, False),
    "log2": (torch.log2, True), "log10": (torch.log10, True), "log1p": (torch.log1p, True),
    "expm1": (torch.expm1, False),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_math(tmp_path, dialect, name):
    fn, positive = UNARY[name]
    check_module(Fn(fn), [_r(1, 4, 5, 6, positive=positive) * 1.7], tmp_path, dialect=dialect)


# ----------------------------------------------------------------------------- models
class SqueezeExcite(nn.Module):
    def __init__(self, c=8, r=4):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1, self.fc2 = nn.Conv2d(c, c // r, 1), nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(self.pool(y)))))
        return y * s + y


class SqueezeExciteLinear(nn.Module):
    """SE with Linear layers and a view to (N, C, 1, 1), as torchvision writes it."""

    def __init__(self, c=8):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(c, 4), nn.Linear(4, c)

    def forward(self, x):
        s = x.mean((2, 3))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s)))).view(x.shape[0], x.shape[1], 1, 1)
        return x * s


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fp16", [False, True])
def test_squeeze_excitation(tmp_path, dialect, fp16):
    check_module(SqueezeExcite(), [_r(1, 3, 12, 12)], tmp_path, dialect=dialect, fp16=fp16,
                 expect_types=["BinaryOp"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_squeeze_excitation_linear(tmp_path, dialect):
    check_module(SqueezeExciteLinear(), [_r(1, 8, 6, 6)], tmp_path, dialect=dialect, expect_types=["BinaryOp"])


def test_batch_of_one_meeting_a_feature_axis(tmp_path):
    """A (1, 4) input against a (3, 1) constant: the input's batch of one lines up with the
    constant's 3 rows, so the (3, 4) result has no batch axis (ncnn computes it as it is)."""
    pt2 = export_pt2(WithConst(torch.add, _r(1, 3)), [_r(1, 1)], tmp_path / "m.pt2")
    ok = convert(str(pt2), ConvertOptions(lint=True))
    assert ok.ok  # batch 1 against (1, 3): the batch axis is size 1 everywhere
    const, x = _r(3, 1), _r(1, 4)
    pt2 = export_pt2(WithConst(torch.add, const), [x], tmp_path / "m2.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    assert result.ok, result.errors
    result.write(tmp_path / "m.param", tmp_path / "m.bin", tmp_path / "p.param", tmp_path / "p.bin")
    got, = run_ncnn(tmp_path / "m.param", tmp_path / "m.bin", [x[0].numpy()], 1)
    np.testing.assert_allclose(got.reshape(3, 4), (x + const).numpy(), rtol=1e-6)
