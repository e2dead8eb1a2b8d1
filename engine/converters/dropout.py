"""Dropout and random values. At inference dropout does nothing, and ``remove_noops`` drops it
before lowering; what reaches these rules is dropout in training mode (``train=True``: a model
exported without ``model.eval()``), which zeroes random values at every run. ncnn has nothing to compute it with,
and a converted model would not be the one the user runs, so it is refused with the cure:
export after ``model.eval()``. A ``native_dropout`` whose mask is used is refused too, and so
is every operator drawing random values (``bernoulli``, core ATen's form of training-mode
``dropout1d/2d``; ``rand``, ``randn``, ``normal``...): the model would not be deterministic, and
ncnn has no random generator.

ATen → pnnx: ``aten.dropout``, ``feature_dropout``, ``alpha_dropout``, ``feature_alpha_dropout``,
``native_dropout`` (``train=False``, its mask unused) → the input itself.
"""
from __future__ import annotations

from ..convert.registry import aten_converter

DROPOUTS = ("aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default",
            "aten.feature_alpha_dropout.default", "aten.native_dropout.default")


def _check_dropout(op, ctx):
    kind = op.type.split(".")[1]
    if op.params.get("train"):
        return (f"unsupported: {kind} in training mode (p={op.params.get('p')}): PyTorch zeroes random values "
                "at every run; export the model after model.eval()")
    if len(op.outputs) > 1 and op.outputs[1].consumers:
        return f"unsupported: {kind}'s mask is used"
    return None


@aten_converter(*DROPOUTS, validator=_check_dropout)
def dropout(ctx, op):
    return op.inputs[0]


RANDOM = ("aten.bernoulli.default", "aten.bernoulli.p", "aten.bernoulli.Tensor", "aten.rand.default",
          "aten.randn.default", "aten.rand_like.default", "aten.randn_like.default", "aten.randint.default",
          "aten.randint.low", "aten.randint_like.default", "aten.randint_like.low_dtype", "aten.randperm.default",
          "aten.normal.Tensor_float", "aten.normal.float_Tensor", "aten.normal.Tensor_Tensor",
          "aten.normal.float_float", "aten.normal_functional.default", "aten.uniform.default",
          "aten.exponential.default", "aten.multinomial.default", "aten.native_dropout_backward.default")


def _random_reason(op) -> str:
    return (f"{op.type.split('.')[1]} draws random values at every run (ncnn has no random generator); "
            "if this is dropout in training mode, export the model after model.eval()")


@aten_converter(*RANDOM, validator=lambda op, ctx: f"unsupported: {_random_reason(op)}")
def random_values(ctx, op):  # refused by its validator; a plug-in overriding it decides otherwise
    ctx.unsupported(_random_reason(op))
