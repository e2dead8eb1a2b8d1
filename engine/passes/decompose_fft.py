"""FFTs along the last dim as products with a constant DFT matrix (ATen level).

ncnn has no FFT layer and no complex numbers, but a discrete Fourier transform of ``N`` points is
a linear map: on a complex tensor's real layout (real and imaginary parts innermost) it is one
matrix product with a constant basis, which ncnn computes as an ``InnerProduct``/``MatMul``.

* ``_fft_r2c(x, [-1], normalization, onesided)`` — ``x`` (..., N) real →
  ``view_as_complex(reshape(x @ B, (..., F, 2)))`` with ``B[n, 2k] = cos(2πkn/N)``,
  ``B[n, 2k+1] = -sin(2πkn/N)`` (``F = N//2 + 1`` one-sided, else ``N``);
* ``_fft_c2c(x, [-1], normalization, forward)`` — complex → complex: ``(..., 2N) @ B`` on the
  real layouts, ``B`` the 2×2 blocks ``[[cos, ±sin], [∓sin, cos]]`` of each (n, k) pair;
* ``_fft_c2r(x, [-1], normalization, N)`` — ``x`` (..., F) complex, Hermitian →
  ``reshape(view_as_real(x), (..., 2F)) @ B`` with ``B[2k, n] = w_k cos(2πkn/N)``,
  ``B[2k+1, n] = -w_k sin(2πkn/N)`` (``w_k`` 1 for the zero and Nyquist frequencies, whose
  imaginary parts are ignored, 2 for the others, which stand for their conjugates too).

``normalization`` 0, 1, 2 scale by 1, ``1/√N``, ``1/N``. The training dialect's ``fft_rfft`` /
``fft_irfft`` (``norm`` "backward", "ortho" or "forward"; ``n`` the signal's length) are the
same. Only a transform along the last dim with static sizes is rewritten, and only up to
:data:`MAX_POINTS` points (the basis is a weight of 2·F·N floats). This is how core ATen's ``istft`` (an inverse real FFT of each frame
before its overlap-add) and ``torch.fft.rfft``/``irfft`` convert; ``stft`` is recomposed into
one ``Spectrogram`` before this pass.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Operator
from ._aten import AtenEmitter
from .manager import graph_pass
from .realize_complex_views import REAL_OF

#: the largest transform rewritten (its basis: 2·F·N floats, 2 MB at 512 points)
MAX_POINTS = 4096


def _scale(normalization: int, n: int) -> float:
    return {0: 1.0, 1: 1.0 / np.sqrt(n), 2: 1.0 / n}[int(normalization)]


def forward_basis(n: int, freqs: int, normalization: int) -> np.ndarray:
    """(N, 2F): a real signal of ``n`` samples times this is its spectrum's real layout."""
    angle = 2 * np.pi * np.outer(np.arange(n), np.arange(freqs)) / n
    basis = np.stack([np.cos(angle), -np.sin(angle)], axis=-1).reshape(n, 2 * freqs)
    return (basis * _scale(normalization, n)).astype(np.float32)


def inverse_basis(n: int, freqs: int, normalization: int) -> np.ndarray:
    """(2F, N): a one-sided spectrum's real layout (``F`` frequencies) times this is the real
    signal of ``n`` samples (frequencies past ``n//2`` ignored, as the inverse real FFT does)."""
    k = np.arange(freqs)
    weight = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0) * (k <= n // 2)
    angle = 2 * np.pi * np.outer(k, np.arange(n)) / n
    basis = np.stack([np.cos(angle), -np.sin(angle)], axis=1) * weight[:, None, None]
    return (basis.reshape(2 * freqs, n) * _scale(normalization, n)).astype(np.float32)


#: ``norm`` of torch.fft's functions as the ``normalization`` of the forward / inverse transform
_NORMS = {None: (0, 2), "backward": (0, 2), "ortho": (1, 1), "forward": (2, 0)}
_FORWARD = ("aten._fft_r2c.default", "aten.fft_rfft.default")


def _normalization(op: Operator) -> int | None:
    if op.type.startswith("aten._fft"):
        return op.params.get("normalization", 0)
    norm = op.params.get("norm")
    if norm not in _NORMS:
        return None
    return _NORMS[norm][0 if op.type in _FORWARD else 1]


def complex_basis(n: int, normalization: int, forward: bool) -> np.ndarray:
    """(2N, 2N): a complex signal's real layout times this is its (inverse) DFT's real layout."""
    sign = -1.0 if forward else 1.0
    angle = 2 * np.pi * np.outer(np.arange(n), np.arange(n)) / n
    cos, sin = np.cos(angle), np.sin(angle)
    basis = np.empty((n, 2, n, 2))
    basis[:, 0, :, 0], basis[:, 1, :, 0] = cos, -sign * sin  # real part of the result
    basis[:, 0, :, 1], basis[:, 1, :, 1] = sign * sin, cos  # imaginary part
    return (basis.reshape(2 * n, 2 * n) * _scale(normalization, n)).astype(np.float32)


def _last_dim_only(op: Operator, rank: int) -> bool:
    dims = op.params.get("dim", -1)
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] % rank == rank - 1


def _static_last(shape) -> bool:
    return shape is not None and len(shape) >= 1 and all(isinstance(d, int) for d in shape[-1:])


def _view(em: AtenEmitter, x, shape: list, name: str):
    return em.op("aten.view.default", {"self": x}, shape=shape, dtype=x.dtype, name=name, size=list(shape))


def _flat_pairs(em: AtenEmitter, x, name: str):
    """A complex ``x`` (..., F) as its real layout flattened to (..., 2F)."""
    pairs = em.op("aten.view_as_real.default", {"self": x}, shape=list(x.shape) + [2], dtype=REAL_OF[x.dtype],
                  name=f"{name}_pairs")
    return _view(em, pairs, list(x.shape[:-1]) + [2 * x.shape[-1]], f"{name}_flat")


def _transform(graph: Graph, op: Operator, basis: np.ndarray) -> None:
    """``op``'s input (its flattened real layout when complex) times ``basis``, as ``op``'s output
    (a complex one through its real layout)."""
    x, out = op.inputs[0], op.outputs[0]
    em = AtenEmitter(graph, op)
    flat = _flat_pairs(em, x, op.name) if x.dtype in REAL_OF else x
    real = REAL_OF.get(out.dtype, out.dtype)
    y = em.op("aten.matmul.default", {"self": flat, "other": em.constant(basis, name=f"{op.name}_basis")},
              shape=list(x.shape[:-1]) + [basis.shape[1]], dtype=real, name=f"{op.name}_product")
    if out.dtype in REAL_OF:
        pairs = _view(em, y, list(out.shape) + [2], f"{op.name}_out_pairs")
        y = em.op("aten.view_as_complex.default", {"self": pairs}, shape=list(out.shape), dtype=out.dtype,
                  name=f"{op.name}_spectrum")
    em.replace(y)
    graph.remove_op(op)


@graph_pass("decompose_fft", "FFTs along the last dim as products with a constant DFT basis")
def run(graph: Graph, cx) -> None:
    for op in graph.ops_of_type(*_FORWARD, "aten._fft_c2r.default", "aten.fft_irfft.default", "aten._fft_c2c.default"):
        x, out = op.inputs[0], op.outputs[0]
        if x.shape is None or out.shape is None or not _static_last(x.shape) or not _static_last(out.shape) \
                or not _last_dim_only(op, len(x.shape)) or max(x.shape[-1], out.shape[-1]) > MAX_POINTS \
                or _normalization(op) is None or len(op.inputs) != 1:
            continue
        n, norm = x.shape[-1], _normalization(op)
        if op.type == "aten._fft_c2c.default":
            if x.dtype in REAL_OF and out.dtype == x.dtype and out.shape[-1] == n:
                _transform(graph, op, complex_basis(n, norm, bool(op.params.get("forward", True))))
        elif op.type in _FORWARD and x.dtype not in REAL_OF and op.params.get("n") in (None, n):
            _transform(graph, op, forward_basis(n, out.shape[-1], norm))
        elif op.type not in _FORWARD and x.dtype in REAL_OF:
            _transform(graph, op, inverse_basis(out.shape[-1], n, norm))
