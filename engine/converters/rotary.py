"""Rotary position embedding (made by the ``fuse_rotary_embedding`` pass).

pnnx → ncnn: ``nn.RotaryEmbed`` (inputs ``x`` and the ``(L, E/2)`` cos/sin tables; param
``interleaved``) → ncnn ``RotaryEmbed`` (``interleaved``): ``x`` as a 3-D ``(heads, L, E)`` blob
(leading dims merged into heads, a single head viewed as one), the tables as 2-D blobs.
"""
from __future__ import annotations

import math

from ..convert.registry import ncnn_rule
from ..convert.shapes import ncnn_shape
from .shape import intermediate, reshape_to


def _check_rotary(op, ctx):
    s = ncnn_shape(op.inputs[0])
    if s is None or len(s) < 2 or not all(isinstance(d, int) for d in s[:-2]):
        return f"unsupported: rotary embedding of {op.inputs[0].name} {op.inputs[0].shape} (ncnn rotates (heads, L, E))"
    return None


@ncnn_rule("nn.RotaryEmbed", validator=_check_rotary)
def rotary_embed(ctx, op):
    x, cos, sin = op.inputs
    s = ncnn_shape(x)
    heads = [math.prod(s[:-2]) if len(s) > 2 else 1] + list(s[-2:])
    tables = [reshape_to(ctx, t, list(t.shape[-2:])) for t in (cos, sin)]
    y = ctx.layer("RotaryEmbed", [reshape_to(ctx, x, heads)] + tables, interleaved=int(bool(op.params["interleaved"])))
    if heads == s:
        return y
    return reshape_to(ctx, intermediate(y, heads), s, final=True)
