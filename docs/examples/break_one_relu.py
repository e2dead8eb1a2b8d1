"""A converter plug-in that deliberately mis-lowers ONE relu (ATen node ``relu_1`` of the bundled
``tiny_cnn.pt2``) to a sigmoid — a stand-in for a converter bug, to see ``pt2ncnn verify`` (or
Studio's Verify) point at exactly that layer::

    pt2ncnn verify resources/samples/tiny_cnn.pt2 --converters docs/examples/break_one_relu.py

Every other relu keeps the built-in rule: this rule's validator refuses them, and the registry
falls through to the next candidate.
"""
from engine.convert import aten_converter

BROKEN = "relu_1"


def _only_that_relu(op, ctx):
    return True if op.name == BROKEN else f"unsupported: not {BROKEN}, the relu this plug-in breaks"


@aten_converter("aten.relu.default", validator=_only_that_relu)
def relu_as_sigmoid(ctx, op):
    return ctx.emit("F.sigmoid", [op.inputs[0]])
