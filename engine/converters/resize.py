"""Resizing: upsample / interpolate (nearest, bilinear, linear, bicubic) and pixel (un)shuffle.

ATen → pnnx:

* ``aten.upsample_nearest2d.vec|default``, ``aten.upsample_bilinear2d.vec|default``,
  ``aten.upsample_bicubic2d.vec|default``, ``aten.upsample_nearest1d.vec|default``,
  ``aten.upsample_linear1d.vec|default`` → ``F.interpolate`` (``size`` or ``scale_factor``,
  ``mode``, ``align_corners``);
* ``aten.pixel_shuffle.default`` → ``F.pixel_shuffle`` (``upscale_factor``);
  ``aten.pixel_unshuffle.default`` → ``F.pixel_unshuffle`` (``downscale_factor``).

pnnx → ncnn: ``Interp`` (resize_type 1 nearest, 2 bilinear/linear, 3 bicubic; ``align_corner``).
A scale factor stays a scale (works for any input size): nearest maps coordinates by 1/scale in
both; ncnn's (bi)linear/bicubic map them by the size ratio, which equals 1/scale only when the
output is exactly input × scale (or does not matter, with align_corners) — other fractional
scales are refused. A size stays a size; a size computed from input sizes at run time
(``x.size(2) // 6``) is an ``Interp`` ``size_expr`` over the blobs it measures. ``PixelShuffle`` (mode 0 = PyTorch's channel order) and ``Reorg``
(mode 0) for pixel_unshuffle.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_shape
from .shape import ncnn_list_expression, size_term
from ..ncnn.enums import InterpResizeType, PixelShuffleMode

_MODE = {"nearest": InterpResizeType.NEAREST, "bilinear": InterpResizeType.BILINEAR,
         "linear": InterpResizeType.BILINEAR, "bicubic": InterpResizeType.BICUBIC}


def _scales(op, n: int):
    if "scale_factors" in op.params:
        s = op.params.get("scale_factors")
        return None if s is None else [float(v) for v in s]
    keys = ("scales_h", "scales_w") if n == 2 else ("scales",)
    s = [op.params.get(k) for k in keys]
    return None if any(v is None for v in s) else [float(v) for v in s]


def _interpolate(mode: str, n: int):
    def convert(ctx, op):
        x, out = op.inputs[0], op.outputs[0]
        scale = _scales(op, n)
        size = op.params.get("output_size")
        params = {"mode": mode}
        if scale is not None:  # PyTorch maps coordinates with the scale when one is given
            params["scale_factor"] = scale
        else:
            params["size"] = [s if isinstance(s, int) else d for s, d in zip(size, (out.shape or [])[-n:])]
        if mode != "nearest":
            params["align_corners"] = bool(op.params.get("align_corners"))
        params["recompute_scale_factor"] = None
        refs = [x]
        if scale is None and not all(isinstance(s, int) for s in params["size"]):
            terms = [str(s) if isinstance(s, int) else (None if op.named_input(f"output_size.{i}") is None else
                                                        size_term(ctx, op.named_input(f"output_size.{i}"), refs))
                     for i, s in enumerate(size)]
            if all(t is not None for t in terms) and len(refs) <= 10:
                params["size_expr"] = f"[{','.join(terms)}]"
            else:
                refs = [x]
        return ctx.emit("F.interpolate", refs, params=params)

    return convert


for _mode, _n, _name in (("nearest", 2, "upsample_nearest2d"), ("bilinear", 2, "upsample_bilinear2d"),
                         ("bicubic", 2, "upsample_bicubic2d"), ("nearest", 1, "upsample_nearest1d"),
                         ("linear", 1, "upsample_linear1d")):
    aten_converter(f"aten.{_name}.vec", f"aten.{_name}.default")(_interpolate(_mode, _n))


@aten_converter("aten.pixel_shuffle.default")
def pixel_shuffle(ctx, op):
    return ctx.emit("F.pixel_shuffle", [op.inputs[0]], params={"upscale_factor": op.params["upscale_factor"]})


@aten_converter("aten.pixel_unshuffle.default")
def pixel_unshuffle(ctx, op):
    return ctx.emit("F.pixel_unshuffle", [op.inputs[0]], params={"downscale_factor": op.params["downscale_factor"]})


# ----------------------------------------------------------------------------- pnnx → ncnn

def _check_interp(op, ctx):
    mode = op.params.get("mode")
    if mode not in _MODE:
        return f"unsupported: interpolate mode {mode!r} (ncnn Interp has nearest, bilinear, bicubic)"
    n = 1 if mode == "linear" else (2 if mode in ("bilinear", "bicubic") else None)
    rank = len(ncnn_shape(op.inputs[0]) or [])
    if n is None:
        n = rank - 1
    if rank != n + 1 or n not in (1, 2):
        return f"unsupported: {mode} interpolate of a {rank}-D ncnn blob"
    return None


def _scale_is_exact(size_in, size_out, scale: float) -> bool:
    """Whether size_out / size_in is exactly ``scale`` (then ratio and scale map alike); for a
    dynamic size, whether that holds for every size (an integer scale)."""
    if isinstance(size_in, int) and isinstance(size_out, int):
        return size_in * scale == size_out
    return float(scale).is_integer()


@ncnn_rule("F.interpolate", validator=_check_interp)
def interpolate_ncnn(ctx, op):
    x, out = op.inputs[0], op.outputs[0]
    mode = op.params["mode"]
    src, dst = ncnn_shape(x), ncnn_shape(out)
    n = len(src) - 1
    align = bool(op.params.get("align_corners"))
    params = {"resize_type": int(_MODE[mode]), "align_corner": int(align)}
    scale = op.params.get("scale_factor")
    if scale is not None:
        scale = list(scale) * n if len(scale) == 1 else list(scale)
        pairs = list(zip(src[1:], dst[1:], scale))
        if not all(not isinstance(i, int) or not isinstance(o, int) or int(i * f) == o for i, o, f in pairs):
            ctx.unsupported(f"interpolate with scale {scale} to a size {dst[1:]} it does not give")
        if mode != "nearest" and not align and not all(_scale_is_exact(i, o, f) for i, o, f in pairs):
            ctx.unsupported(f"{mode} interpolate with fractional scale {scale}: ncnn maps coordinates by the size "
                            "ratio, PyTorch by 1/scale (use size= or recompute_scale_factor=True)")
    if scale is not None:
        if n == 2:
            params.update(height_scale=scale[0], width_scale=scale[1])
        else:
            params.update(width_scale=scale[0])
    elif op.params.get("size_expr"):  # a size computed at run time from blob sizes
        params["size_expr"] = ncnn_list_expression(str(op.params["size_expr"]), op.inputs)
        return ctx.layer("Interp", list(op.inputs), **params)
    else:
        size = dst[1:]
        if not all(isinstance(s, int) for s in size):
            ctx.unsupported(f"{mode} interpolate to a dynamic size {size}")
        if n == 2:
            params.update(output_height=size[0], output_width=size[1])
        else:  # ncnn falls back to the scales unless both sizes are set; h is unused for 2-D blobs
            params.update(output_height=1, output_width=size[0])
    return ctx.layer("Interp", [x], **params)


def _check_3d(op, ctx):
    rank = len(ncnn_shape(op.inputs[0]) or [])
    if rank != 3:
        return f"unsupported: {op.type} of a {rank}-D ncnn blob (expects (C, H, W))"
    return None


@ncnn_rule("F.pixel_shuffle", validator=_check_3d)
def pixel_shuffle_ncnn(ctx, op):
    return ctx.layer("PixelShuffle", [op.inputs[0]], upscale_factor=op.params["upscale_factor"],
                     mode=int(PixelShuffleMode.TORCH))


@ncnn_rule("F.pixel_unshuffle", validator=_check_3d)
def pixel_unshuffle_ncnn(ctx, op):
    return ctx.layer("Reorg", [op.inputs[0]], stride=op.params["downscale_factor"], mode=int(PixelShuffleMode.TORCH))
