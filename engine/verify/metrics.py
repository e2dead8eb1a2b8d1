"""Error measures between an ncnn blob and its PyTorch value: :class:`ErrorStats` and
:func:`compare`.

``max_abs`` is the largest absolute difference; ``max_rel`` is ``max_abs`` relative to the
largest magnitude of the PyTorch value (the harness's measure: stable where values cross
zero); ``cosine`` the cosine similarity of the flattened tensors. A value is within tolerance
when ``max_abs <= atol + rtol * ref_max``. NaN/Inf count as equal only where both sides hold
the same one; anywhere else the error is infinite.
"""
from __future__ import annotations

import math

import numpy as np

from ..records import record


@record(frozen=True)
class ErrorStats:
    """How far one ncnn value is from its PyTorch reference."""

    max_abs: float  #: max |ncnn - torch|
    max_rel: float  #: max_abs / max |torch| (max_abs itself when the reference is all zeros)
    cosine: float  #: cosine similarity of the flattened values (1.0 when both are all zeros)
    ref_max: float  #: max |torch|

    def within(self, atol: float, rtol: float) -> bool:
        return self.max_abs <= atol + rtol * self.ref_max

    @staticmethod
    def mismatch() -> "ErrorStats":
        """The stats of a value that cannot be compared element-wise (wrong size, not computed)."""
        return ErrorStats(math.inf, math.inf, 0.0, 0.0)

    @staticmethod
    def worst(items: "list[ErrorStats]") -> "ErrorStats | None":
        """Element-wise worst of several stats (max errors, min cosine)."""
        if not items:
            return None
        return ErrorStats(max(s.max_abs for s in items), max(s.max_rel for s in items),
                          min(s.cosine for s in items), max(s.ref_max for s in items))


def compare(got: np.ndarray, want: np.ndarray) -> ErrorStats:
    """Compare two arrays of the same size (shapes may differ: both are flattened). Runs in
    float32 (what ncnn computes in) with float64 sums; finite data takes the fast path."""
    g = np.asarray(got).ravel()
    w = np.asarray(want).ravel()
    if g.size != w.size:
        raise ValueError(f"sizes differ: {g.size} vs {w.size}")
    if g.size == 0:
        return ErrorStats(0.0, 0.0, 1.0, 0.0)
    g = g.astype(np.float32, copy=False)
    w = w.astype(np.float32, copy=False)
    if not (np.isfinite(g).all() and np.isfinite(w).all()):
        return _compare_special(g.astype(np.float64), w.astype(np.float64))
    with np.errstate(over="ignore"):
        max_abs = float(np.abs(g - w).max())
    if not math.isfinite(max_abs):  # float32 overflow of the difference itself
        max_abs = float(np.abs(g.astype(np.float64) - w).max())
    ref_max = float(max(w.max(), -w.min()))
    max_rel = max_abs / ref_max if ref_max > 0 else max_abs
    return ErrorStats(max_abs, max_rel, _cosine(g, w), ref_max)


def _cosine(g: np.ndarray, w: np.ndarray) -> float:
    dot = lambda a, b: float(np.einsum("i,i->", a, b, dtype=np.float64))  # noqa: E731
    ng, nw = dot(g, g), dot(w, w)
    if ng == 0.0 and nw == 0.0:
        return 1.0
    if ng == 0.0 or nw == 0.0:
        return 0.0
    return max(-1.0, min(1.0, dot(g, w) / math.sqrt(ng * nw)))


def _compare_special(g: np.ndarray, w: np.ndarray) -> ErrorStats:
    """:func:`compare` of arrays holding NaN or Inf (float64)."""
    same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(g) & (g == w))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - w)
    diff[same_special] = 0.0
    diff[np.isnan(diff)] = math.inf
    max_abs = float(diff.max())
    finite_w = w[np.isfinite(w)]
    ref_max = float(np.abs(finite_w).max()) if finite_w.size else 0.0
    max_rel = max_abs / ref_max if ref_max > 0 else max_abs
    ok = np.isfinite(g) & np.isfinite(w)
    return ErrorStats(max_abs, max_rel, _cosine(g[ok], w[ok]), ref_max)
