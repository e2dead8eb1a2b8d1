"""Resizing: upsample / interpolate (nearest, bilinear, linear, bicubic, trilinear) and pixel
(un)shuffle.

ATen → pnnx:

* ``aten.upsample_nearest1d|2d|3d.vec|default``, ``aten.upsample_linear1d.vec|default``,
  ``aten.upsample_bilinear2d.vec|default``, ``aten.upsample_bicubic2d.vec|default``,
  ``aten.upsample_trilinear3d.vec|default`` → ``F.interpolate`` (``size`` or ``scale_factor``,
  ``mode``, ``align_corners``);
* ``aten.pixel_shuffle.default`` → ``F.pixel_shuffle`` (``upscale_factor``);
  ``aten.pixel_unshuffle.default`` → ``F.pixel_unshuffle`` (``downscale_factor``).

pnnx → ncnn: ``Interp`` (resize_type 1 nearest, 2 bilinear/linear, 3 bicubic; ``align_corner``).
A scale factor stays a scale (works for any input size): nearest maps coordinates by 1/scale in
both; ncnn's (bi)linear/bicubic map them by the size ratio, which equals 1/scale only when the
output is exactly input × scale (or does not matter, with align_corners) — other fractional
scales are refused. A size stays a size. ncnn's Interp has no depth axis: a 3-D resize of a
(C, D, H, W) blob is two Interps, ``Reshape (C·D, H, W)`` → resize (H, W) → ``Reshape
(C, D, H'·W')`` → resize the height D with the width kept (an exact identity in both nearest
and linear modes) → ``Reshape (C, D', H', W')``; shapes must be static. A size computed from
input sizes at run time (``x.size(2) // 6``) is an ``Interp`` ``size_expr`` over the blobs it
measures. ``PixelShuffle`` (mode 0 = PyTorch's channel order) and ``Reorg``
(mode 0) for pixel_unshuffle.
"""
from __future__ import annotations

from ..convert.registry import aten_converter, ncnn_rule
from ..convert.shapes import ncnn_shape
from ..ncnn.enums import InterpResizeType, PixelShuffleMode
from .shape import intermediate, is_static, ncnn_list_expression, reshape_to, size_term

_MODE = {"nearest": InterpResizeType.NEAREST, "bilinear": InterpResizeType.BILINEAR,
         "linear": InterpResizeType.BILINEAR, "bicubic": InterpResizeType.BICUBIC,
         "trilinear": InterpResizeType.BILINEAR}
#: the spatial rank of each mode (nearest: the input's)
_MODE_RANK = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _scales(op, n: int):
    if "scale_factors" in op.params:
        s = op.params.get("scale_factors")
        return None if s is None else [float(v) for v in s]
    keys = ("scales",) if n == 1 else ("scales_d", "scales_h", "scales_w")[-n:]
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
                         ("linear", 1, "upsample_linear1d"), ("nearest", 3, "upsample_nearest3d"),
                         ("trilinear", 3, "upsample_trilinear3d")):
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
    rank = len(ncnn_shape(op.inputs[0]) or [])
    n = _MODE_RANK.get(mode, rank - 1)
    if rank != n + 1 or n not in (1, 2, 3):
        return f"unsupported: {mode} interpolate of a {rank}-D ncnn blob"
    if n == 3 and not (is_static(ncnn_shape(op.inputs[0])) and is_static(ncnn_shape(op.outputs[0]))):
        return f"unsupported: 3-D {mode} interpolate of a dynamic shape {op.inputs[0].shape}"
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
    src, dst = ncnn_shape(x), ncnn_shape(out)
    n = len(src) - 1
    scale = op.params.get("scale_factor")
    if scale is not None:
        scale = list(scale) * n if len(scale) == 1 else list(scale)
    elif op.params.get("size_expr") and n < 3:  # a size computed at run time from blob sizes
        return ctx.layer("Interp", list(op.inputs), resize_type=int(_MODE[op.params["mode"]]),
                         align_corner=int(bool(op.params.get("align_corners"))),
                         size_expr=ncnn_list_expression(str(op.params["size_expr"]), op.inputs))
    _check_scale(ctx, op.params["mode"], bool(op.params.get("align_corners")), src[1:], dst[1:], scale)
    if n == 3:
        return _interp_3d(ctx, op, src, dst, scale)
    return ctx.layer("Interp", [x], **_interp_params(op, src[1:], dst[1:], scale))


def _check_scale(ctx, mode: str, align: bool, src, dst, scale) -> None:
    """Refuse a scale factor ncnn's Interp would map other than PyTorch (per spatial axis)."""
    if scale is not None:
        pairs = list(zip(src, dst, scale))
        if not all(not isinstance(i, int) or not isinstance(o, int) or int(i * f) == o for i, o, f in pairs):
            ctx.unsupported(f"interpolate with scale {scale} to a size {list(dst)} it does not give")
        if mode != "nearest" and not align and not all(_scale_is_exact(i, o, f) for i, o, f in pairs):
            ctx.unsupported(f"{mode} interpolate with fractional scale {scale}: ncnn maps coordinates by the size "
                            "ratio, PyTorch by 1/scale (use size= or recompute_scale_factor=True)")
    elif not all(isinstance(s, int) for s in dst):
        ctx.unsupported(f"{mode} interpolate to a dynamic size {dst}")


def _interp_params(op, src, dst, scale) -> dict:
    """One Interp's params resizing the (1 or 2) spatial axes ``src`` to ``dst`` (by ``scale``
    when given)."""
    params = {"resize_type": int(_MODE[op.params["mode"]]), "align_corner": int(bool(op.params.get("align_corners")))}
    if scale is not None:
        params.update(zip(("height_scale", "width_scale")[-len(scale):], scale))
    elif len(dst) == 2:
        params.update(output_height=dst[0], output_width=dst[1])
    else:  # ncnn falls back to the scales unless both sizes are set; h is unused for 2-D blobs
        params.update(output_height=1, output_width=dst[0])
    return params


def _interp_3d(ctx, op, src, dst, scale):
    """Resize (C, D, H, W) → (C, D', H', W') as (H, W) on a (C·D, H, W) view, then D on a
    (C, D, H'·W') view (width kept: an exact identity in both modes)."""
    (c, d, h, w), (_, d2, h2, w2) = src, dst
    if op.params.get("align_corners") and (1 in (d2, h2, w2) or h2 * w2 == 1):
        ctx.unsupported(f"align_corners interpolate to an extent of 1 {dst[1:]}")
    y = reshape_to(ctx, op.inputs[0], [c * d, h, w], name=f"{ctx.name}_hw")
    if (h, w) != (h2, w2):
        hw = intermediate(ctx.layer("Interp", [y], name=f"{ctx.name}_interp_hw",
                                    **_interp_params(op, (h, w), (h2, w2), scale and scale[1:])), [c * d, h2, w2])
        y = hw
    y = reshape_to(ctx, y, [c, d, h2 * w2], name=f"{ctx.name}_d")
    if d != d2:
        y = intermediate(ctx.layer("Interp", [y], name=f"{ctx.name}_interp_d",
                                   **_interp_params(op, (d, h2 * w2), (d2, h2 * w2), scale and [scale[0], 1.0])),
                         [c, d2, h2 * w2])
    return reshape_to(ctx, y, dst, final=True)


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
