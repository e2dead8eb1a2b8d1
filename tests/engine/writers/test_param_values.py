"""Float text forms: pnnx's float_to_string, and ncnn floats that ncnn's own reader turns back
into the same float32 within its 15-character limit."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.writers.values import float_to_string, ncnn_float, parse_ncnn_float


@pytest.mark.parametrize("value, text", [
    (0.0, "0.0"), (-0.0, "0.0"), (1.0, "1.0"), (0.1, "0.1"), (-2.5, "-2.5"), (1e-5, "1.000000e-5"),
    (1e6, "1.000000e6"), (1 / 3, "0.333333343"), (123456.7, "123456.703"), (0.0001, "0.0001"),
    (-3.4028234663852886e38, "-3.40282347e38"), (1.67326324, "1.67326319"), (float("inf"), "inf"),
])
def test_float_to_string_as_pnnx(value, text):
    assert float_to_string(value) == text


@settings(max_examples=1500, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_ncnn_float_round_trips_through_ncnns_reader(bits):
    f = np.array([bits], np.uint32).view(np.float32)[0]
    if not np.isfinite(f):
        return
    s = ncnn_float(f)
    assert len(s) <= 15 and any(c in s for c in ".e")
    assert parse_ncnn_float(s) == f


def test_ncnn_float_where_pnnx_short_form_rounds_differently():
    f = np.float32(4.614836e8)
    assert parse_ncnn_float(float_to_string(f)) != f  # pnnx's form, read by ncnn
    assert parse_ncnn_float(ncnn_float(f)) == f


def test_ncnn_float_specials():
    assert ncnn_float(math.inf) == "3.40282347e38" and ncnn_float(-math.inf) == "-3.40282347e38"
    with pytest.raises(ValueError, match="NaN"):
        ncnn_float(math.nan)


@pytest.mark.parametrize("text", ["1.5", "-0.25", "3e2", "1.000000e-5", "7", ".5", "2.", "-1.17549435e-38"])
def test_parse_ncnn_float_agrees_with_python_on_plain_numbers(text):
    assert parse_ncnn_float(text) == np.float32(float(text))
