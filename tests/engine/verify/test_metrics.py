"""engine.verify.metrics: error measures and the tolerance test."""
import math

import numpy as np
import pytest

from engine.verify.metrics import ErrorStats, compare


def test_identical_values_and_layouts():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    s = compare(a, a.reshape(6, 4).astype(np.float64))
    assert (s.max_abs, s.max_rel, s.ref_max) == (0.0, 0.0, 23.0) and s.cosine == pytest.approx(1.0)
    assert s.within(0.0, 0.0)


def test_relative_to_largest_magnitude_and_tolerance():
    want = np.array([0.0, -4.0, 2.0])
    s = compare(want + np.array([0.0, 0.0, 0.01]), want)
    assert s.max_abs == pytest.approx(0.01) and s.max_rel == pytest.approx(0.0025)
    assert s.within(0.0, 0.0025 + 1e-12) and not s.within(0.0, 0.002) and s.within(0.01, 0.0)
    assert 0.99 < s.cosine < 1.0


def test_specials_zeros_and_sizes():
    nan, inf = float("nan"), float("inf")
    assert compare(np.array([nan, inf, 1.0]), np.array([nan, inf, 1.0])).max_abs == 0.0
    assert compare(np.array([nan, 1.0]), np.array([0.0, 1.0])).max_abs == math.inf
    assert compare(np.array([inf]), np.array([-inf])).max_abs == math.inf
    z = compare(np.zeros(3), np.zeros(3))
    assert (z.max_rel, z.cosine) == (0.0, 1.0)
    one_sided = compare(np.array([0.5, 0.0]), np.zeros(2))
    assert one_sided.max_rel == 0.5 and one_sided.cosine == 0.0  # all-zero reference: absolute
    assert compare(np.array([1.0, 2.0]), np.array([-1.0, -2.0])).cosine == pytest.approx(-1.0)
    with pytest.raises(ValueError):
        compare(np.zeros(3), np.zeros(4))


def test_worst_and_mismatch():
    a, b = ErrorStats(1.0, 0.1, 0.9, 10.0), ErrorStats(0.5, 0.2, 0.99, 2.5)
    assert ErrorStats.worst([a, b]) == ErrorStats(1.0, 0.2, 0.9, 10.0)
    assert ErrorStats.worst([]) is None
    assert not ErrorStats.mismatch().within(1e9, 1e9)
