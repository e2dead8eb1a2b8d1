"""pnnx expressions and symbolic sizes as Python source: every function of the expression
language, run by PyTorch, gives what the language's own evaluator computes; sizes are read from
the inputs at run time."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from engine.converters._expression import BINARY_FUNCS, UNARY_FUNCS, evaluate  # noqa: E402
from engine.ir import Operand  # noqa: E402
from engine.writers.py_expr import SymbolCode, expression  # noqa: E402

A, B = 0.7, -1.3  # inputs @0 and @1 (valid for every function below)
_DOMAIN = {"acosh": 1.5, "log": A, "sqrt": A, "rsqrt": A, "log10": A, "asin": A, "acos": A, "atanh": A}


@pytest.mark.parametrize("name", sorted(UNARY_FUNCS))
def test_unary_functions(name):
    x = _DOMAIN.get(name, B if name not in ("log1p",) else A)
    code = expression(f"{name}(@0)", lambda i: "v0")
    got = eval(code, {"torch": torch, "v0": torch.tensor(x, dtype=torch.float64)})
    assert math.isclose(float(got), float(evaluate(name, [x])), rel_tol=1e-12, abs_tol=1e-12), code


@pytest.mark.parametrize("name", sorted(BINARY_FUNCS))
@pytest.mark.parametrize("literal_second", [False, True])
def test_binary_functions_with_tensors_and_literals(name, literal_second):
    a, b = (A, 2.0) if name == "pow" else (A, B)
    text = f"{name}(@0,{b!r})" if literal_second else f"{name}(@0,@1)"
    code = expression(text, lambda i: f"v{i}")
    env = {"torch": torch, "v0": torch.tensor(a, dtype=torch.float64), "v1": torch.tensor(b, dtype=torch.float64)}
    got = eval(code, env)
    assert math.isclose(float(got), float(evaluate(name, [a, b])), rel_tol=1e-12), code


def test_nested_expression_and_sizes_of_python_numbers():
    code = expression("maximum(add(size(@0,1),mul(@1,2)),7)", lambda i: ["x", "n"][i], numbers=True)
    assert "torch.sym_max" in code
    assert eval(code, {"torch": torch, "x": torch.zeros(2, 5), "n": 3}) == 11
    assert eval(expression("sub(1,@0)", lambda i: "t"), {"t": torch.tensor([0.25])}).item() == 0.75


def test_symbolic_sizes_are_read_from_the_inputs():
    x = Operand("x", shape=["s0", 3, "s1"])
    y = Operand("y", shape=[2, "s1"])
    sym = SymbolCode([(x, "x"), (y, "y")])
    env = {"x": torch.zeros(4, 3, 6), "y": torch.zeros(2, 6), "torch": torch}
    assert eval(sym.dim("2*s0-1"), env) == 7
    assert eval(sym.dim("max(1;s1-8)"), env) == 1
    assert sym.dim("u5") is None  # no input carries it
    assert sym.dims([1, "s0", 8]) == ["1", "-1", "8"]  # one unknown: -1
    assert [eval(d, env) for d in sym.dims(["s0", "s1", 3])] == [4, 6, 3]
    assert sym.dims(["u1", "u2"]) is None
    assert sym.dims([-1, "s0", 3]) == ["-1", "x.size(0)", "3"]  # a static -1 already infers one dim
    assert sym.dims([-1, "u1", 3]) is None
    numpy_sym = SymbolCode([(x, "a")], size="{var}.shape[{dim}]", minmax=("max", "min"))
    assert numpy_sym.dim("s0") == "a.shape[0]"
