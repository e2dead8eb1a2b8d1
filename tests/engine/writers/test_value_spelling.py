"""How the writers spell param values and shapes: the ``_pnnx.py`` source (``literal``) and the
``.pnnx.param`` text (``encode_value``, ``_shape``). Their fast paths for exact ints, int
sequences and repeated shapes must spell what the general code spells."""
from __future__ import annotations

import math

import numpy as np
import pytest

from engine.writers.pnnx_writer import _shape, encode_value
from engine.writers.py_source import literal

LITERALS = [
    (0, "0"), (-7, "-7"), (2**70, str(2**70)), (True, "True"), (None, "None"), ("a'b", '"a\'b"'),
    (1.5, "1.5"), ([], "[]"), ((), "()"), ((5,), "(5,)"), ((1, -2), "(1, -2)"), ([3, 4, 5], "[3, 4, 5]"),
    ([True, 2], "[True, 2]"), ([1, 2.5], "[1, 2.5]"), ([[1, 2], [3]], "[[1, 2], [3]]"), ((1, "s0"), "(1, 's0')"),
    (np.int64(4), "4"), ([np.int64(4), 5], "[4, 5]"), (np.array([1, 2]), "[1, 2]"),
]


@pytest.mark.parametrize("value,text", LITERALS, ids=[repr(v) for v, _ in LITERALS])
def test_literal_spells_python_source(value, text):
    assert literal(value) == text
    back = eval(text, {"__builtins__": {}}, {"float": float})
    if isinstance(value, np.ndarray):
        value = value.tolist()
    assert back == value and type(back) is type(value if not isinstance(value, np.generic) else value.item())


def test_literal_non_finite_floats():
    assert literal(float("nan")) == "float('nan')"
    assert literal(-math.inf) == "-float('inf')"
    assert literal([1, math.inf]) == "[1, float('inf')]"


ENCODED = [
    (3, "3"), (-1, "-1"), (True, "True"), (None, "None"), ([], "()"), ((7,), "(7)"), ([1, -2, 3], "(1,-2,3)"),
    ([True, 1], "(True,1)"), ([1, 0.5], "(1,0.5)"), ([[1], [2, 3]], "((1),(2,3))"),
    (np.int32(9), "9"), ([np.int64(2), 3], "(2,3)"), ("zeros", "zeros"),
]


@pytest.mark.parametrize("value,text", ENCODED, ids=[repr(v) for v, _ in ENCODED])
def test_encode_value_spells_pnnx_param(value, text):
    assert encode_value(value) == text


def test_encode_value_fast_paths_spell_and_refuse_as_the_general_code(caplog):
    """Exact floats and strings take fast paths (a string's check is remembered): a float spells
    as a numpy one does; a string with whitespace is stripped with a warning, and one with '='
    refused, every time it comes."""
    import logging

    for x, text in ((0.1, "0.1"), (1e-5, "1.000000e-5"), (-2.0, "-2.0")):
        assert encode_value(x) == encode_value(np.float64(x)) == encode_value(np.float32(x)) == text
    assert encode_value((0.5, 2)) == "(0.5,2)"
    with caplog.at_level(logging.WARNING, logger="engine.writers.pnnx_writer"):
        assert encode_value("a b") == encode_value("a b") == "ab"
    assert sum("removing whitespace" in r.getMessage() for r in caplog.records) == 2
    for _ in range(2):
        with pytest.raises(ValueError, match="contains '='"):
            encode_value("x=1")


def test_shape_spelling_and_its_memo():
    assert _shape([1, 3, 224, 224]) == "(1,3,224,224)"
    assert _shape([2, -1, None, "s0"]) == "(2,?,?,?)"
    assert _shape(()) == "()"
    # equal keys of other types spell the same; a different shape is not served from the memo
    assert _shape((1, True, 3.0)) == "(1,1,3)"
    assert _shape([1, 1, 3]) == "(1,1,3)"
    assert _shape([1, 1, 4]) == "(1,1,4)"
    assert _shape([-1, 1, 3]) == "(?,1,3)"
    with pytest.raises(TypeError):  # something unhashable is refused as before, not memoised
        _shape([[1], 2])
