"""Sampling a tensor at computed positions: ``F.grid_sample`` and ``F.affine_grid``.

ATen → pnnx:

* ``aten.grid_sampler.default`` / ``aten.grid_sampler_2d.default`` /
  ``aten.grid_sampler_3d.default`` → ``F.grid_sample`` (``mode`` bilinear / nearest / bicubic,
  ``padding_mode`` zeros / border / reflection, ``align_corners``) of the input and the grid;
* ``aten.affine_grid_generator.default`` → the grid PyTorch computes: a constant base grid
  ``(D·H·W, nd + 1)`` of normalized coordinates and ones, ``torch.matmul`` by ``theta``
  transposed, reshaped to ``(N, [D,] H, W, nd)`` (what core ATen's decomposition computes too).

pnnx → ncnn: ``GridSample`` (``sample_type``, ``padding_mode``, ``align_corner``) on a (C, H, W)
or (C, D, H, W) blob with the grid as the batch-less ``(H', W', 2)`` / ``(D', H', W', 3)`` blob
(``permute_fusion`` 0); 3-D bicubic is refused (the runtime has none).
"""
from __future__ import annotations

import numpy as np

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_axis, ncnn_rank
from ..ncnn.enums import GridSamplePadding, GridSampleType

#: PyTorch's interpolation_mode / padding_mode integers
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}
_NCNN_MODE = {"bilinear": GridSampleType.BILINEAR, "nearest": GridSampleType.NEAREST,
              "bicubic": GridSampleType.BICUBIC}
_NCNN_PADDING = {"zeros": GridSamplePadding.ZEROS, "border": GridSamplePadding.BORDER,
                 "reflection": GridSamplePadding.REFLECTION}


@aten_converter("aten.grid_sampler.default", "aten.grid_sampler_2d.default", "aten.grid_sampler_3d.default")
def grid_sampler(ctx, op):
    mode, padding = op.params.get("interpolation_mode", 0), op.params.get("padding_mode", 0)
    if mode not in _MODES or padding not in _PADDINGS:
        ctx.unsupported(f"grid_sample interpolation_mode={mode!r} padding_mode={padding!r}")
    params = {"mode": _MODES[mode], "padding_mode": _PADDINGS[padding],
              "align_corners": bool(op.params.get("align_corners"))}
    return ctx.emit("F.grid_sample", list(op.inputs[:2]), params=params, input_names=["input", "grid"])


def _coordinates(n: int, align_corners: bool) -> np.ndarray:
    """PyTorch's normalized sample positions along an axis of ``n`` (affine_grid)."""
    if n <= 1:
        return np.zeros(max(n, 0), np.float64)
    pos = np.linspace(-1.0, 1.0, n)
    return pos if align_corners else pos * (n - 1) / n


def base_grid(spatial: list[int], align_corners: bool) -> np.ndarray:
    """``(prod(spatial), nd + 1)``: for each position (row-major, w fastest) its x, y[, z]
    coordinates and a 1."""
    axes = [_coordinates(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # d, h, w order
    cols = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)))]
    return np.stack(cols, axis=1).astype(np.float32)


@aten_converter("aten.affine_grid_generator.default")
def affine_grid(ctx, op):
    theta = op.inputs[0]
    size = op.params.get("size")
    if not isinstance(size, list) or len(size) not in (4, 5) or not all(isinstance(s, int) for s in size):
        ctx.unsupported(f"affine_grid to size {size!r} (a constant (N, C, [D,] H, W) converts)")
    spatial = size[2:]
    nd = len(spatial)
    n = size[0]
    if theta.shape is None or list(theta.shape) != [n, nd, nd + 1]:
        ctx.unsupported(f"affine_grid of theta {theta.shape} for size {size}")
    base = ctx.constant(base_grid(spatial, bool(op.params.get("align_corners"))), name=f"{ctx.name}_base")
    t = ctx.emit("Tensor.permute", [theta], params={"dims": [0, 2, 1]}, shape=[n, nd + 1, nd])
    rows = int(np.prod(spatial))
    grid = ctx.emit("torch.matmul", [base, t], input_names=["input", "other"], shape=[n, rows, nd])
    return ctx.emit("Tensor.reshape", [grid], params={"shape": [n, *spatial, nd]})


def _check_grid_sample(op, ctx):
    x, grid = op.inputs[:2]
    rank = ncnn_rank(x)
    if rank not in (3, 4) or ncnn_axis(x, 1) != 0:
        return f"unsupported: grid_sample of {x.name} {x.shape} (expects (N, C, H, W) or (N, C, D, H, W))"
    if ncnn_rank(grid) != rank or grid.shape[-1] != rank - 1:
        return f"unsupported: grid_sample grid {grid.name} {grid.shape} does not match the input {x.shape}"
    if rank == 4 and op.params["mode"] == "bicubic":
        return "unsupported: bicubic grid_sample of a 3-D volume (ncnn's GridSample has none)"
    return None


@ncnn_rule("F.grid_sample", validator=_check_grid_sample)
def grid_sample_layer(ctx, op):
    p = op.params
    return ctx.layer("GridSample", list(op.inputs[:2]), sample_type=int(_NCNN_MODE[p["mode"]]),
                     padding_mode=int(_NCNN_PADDING[p["padding_mode"]]), align_corner=int(bool(p["align_corners"])),
                     permute_fusion=0)
