"""Keep the result of a global average/max pooling as ncnn's compact (C) vector while the layers
reading it can use it, as pnnx's ``legalize_global_pooling_layout`` does (ncnn level here).

A ``Pooling`` with ``adaptive_pooling`` to 1×1 (what PyTorch's (N, C, 1, 1) result needs)
becomes global pooling (a (C) blob). Following it:

* elementwise layers (activations, ``UnaryOp``, scalar ``BinaryOp``...) stay compact;
* a 1×1 ``Convolution`` (stride 1, no padding or dilation) becomes an ``InnerProduct`` with the
  same weights and activation — much faster on a 1×1 map (squeeze-and-excitation blocks);
* a ``Reshape``/``Flatten`` to (C) disappears;
* a ``BinaryOp`` with a (C, H, W) blob of the same C stays as is (ncnn broadcasts a (C) vector
  along the channels), or with another compact vector stays compact;
* any other reader gets a ``Reshape`` back to (C, 1, 1) (one per compact blob).
"""
from __future__ import annotations

from ..convert.shapes import ncnn_shape
from ..ncnn.layers import make_params, param_values, resolve_params
from .manager import graph_pass

#: single-input layers that work element by element (a (C) blob stays (C))
ELEMENTWISE = {"ReLU", "ReLU6", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Swish", "Mish", "TanH", "ELU",
               "SELU", "GELU", "AbsVal", "UnaryOp", "Erf", "Power", "Exp", "Log", "BNLL", "Dropout", "Softplus",
               "CELU", "Threshold"}


def _adaptive_1x1(op) -> bool:
    if op.type != "Pooling" or len(ncnn_shape(op.inputs[0]) or []) != 3:
        return False
    v = param_values("Pooling", op.params)
    return v.get("adaptive_pooling") == 1 and v.get("out_w") == 1 and v.get("out_h", 1) == 1


def _pointwise_conv(op) -> bool:
    if op.type != "Convolution" or len(op.inputs) != 1:
        return False
    p = resolve_params("Convolution", op.params)
    return (p["kernel_w"] == p["kernel_h"] == 1 and p["stride_w"] == p["stride_h"] == 1
            and p["dilation_w"] == p["dilation_h"] == 1
            and p["pad_left"] == p["pad_right"] == p["pad_top"] == p["pad_bottom"] == 0
            and not p["int8_scale_term"] and not p["dynamic_weight"])


def _to_inner_product(op) -> None:
    p = resolve_params("Convolution", op.params)
    op.type = "InnerProduct"
    op.params = make_params("InnerProduct", num_output=p["num_output"], bias_term=p["bias_term"],
                            weight_data_size=p["weight_data_size"], activation_type=p["activation_type"] or None,
                            activation_params=list(p["activation_params"]) or None)


def _compact(opd, channels: int) -> None:
    opd.shape = [channels]
    opd.meta["batch"] = False
    opd.meta["compact_pool"] = True


class _Legalizer:
    def __init__(self, graph):
        self.graph = graph
        self.restored: dict[int, object] = {}  # id(compact operand) → its (C, 1, 1) reshape
        self.seen: set[tuple[int, int]] = set()  # (compact operand, reader) pairs handled

    def restore(self, opd, channels: int, consumer) -> None:
        """Make ``consumer`` read a (C, 1, 1) view of compact ``opd``."""
        view = self.restored.get(id(opd))
        if view is None:
            view = self.graph.new_operand(f"{opd.name}_c11", dtype=opd.dtype, shape=[channels, 1, 1])
            view.meta["batch"] = False
            producer = opd.producer
            reshape = self.graph.add_op("Reshape", f"{opd.name}_c11", [opd], [view], after=producer,
                                        params=make_params("Reshape", w=1, h=1, c=channels),
                                        provenance=producer.provenance)
            for k in ("source", "module_stack", "aten_op"):
                if k in producer.meta:
                    reshape.meta[k] = producer.meta[k]
            self.restored[id(opd)] = view
        for i, x in enumerate(consumer.inputs):
            if x is opd:
                self.graph.set_input(consumer, i, view)

    def spread(self, start, channels: int) -> None:
        work = [(start, channels)]
        while work:
            opd, n = work.pop()
            for c in list(opd.consumers):
                if c in self.graph.ops and (id(opd), id(c)) not in self.seen:
                    self.seen.add((id(opd), id(c)))
                    work.extend(self.visit(opd, c, n))

    def visit(self, opd, c, channels: int) -> list:
        """Handle consumer ``c`` of compact ``opd``; return the (operand, channels) to visit next."""
        single = len(c.inputs) == 1 and len(c.outputs) == 1
        if single and (c.type in ELEMENTWISE or (c.type == "BinaryOp" and _scalar_binary(c))):
            _compact(c.outputs[0], channels)
            return [(c.outputs[0], channels)]
        if single and c.type in ("Reshape", "Flatten") and ncnn_shape(c.outputs[0]) == [channels]:
            # its readers already expect (C): they read the vector itself
            self.seen.update((id(opd), id(r)) for r in c.outputs[0].consumers)
            self.graph.replace_all_uses(c.outputs[0], opd)
            self.graph.remove_op(c)
            return []
        if single and _pointwise_conv(c):
            _to_inner_product(c)
            n = param_values("InnerProduct", c.params)["num_output"]
            _compact(c.outputs[0], n)
            return [(c.outputs[0], n)]
        if c.type == "BinaryOp" and len(c.inputs) == 2 and len(c.outputs) == 1:
            other = c.inputs[1] if c.inputs[0] is opd else c.inputs[0]
            shape = ncnn_shape(other)
            if other is opd or (shape == [channels] and other.meta.get("compact_pool")):
                _compact(c.outputs[0], channels)
                return [(c.outputs[0], channels)]
            if shape is not None and len(shape) == 3 and shape[0] == channels:
                return []  # ncnn broadcasts a (C) vector along the channels of (C, H, W)
        self.restore(opd, channels, c)
        return []


def _scalar_binary(op) -> bool:
    return bool(param_values("BinaryOp", op.params).get("with_scalar"))


@graph_pass("legalize_global_pooling_layout",
            "global pooling keeps its (C) vector: 1x1 convs after it become InnerProduct, reshapes go")
def run(graph, cx):
    legalizer = _Legalizer(graph)
    for op in list(graph.ops):
        if op not in graph.ops or not _adaptive_1x1(op):
            continue
        channels = ncnn_shape(op.inputs[0])[0]
        if not isinstance(channels, int):
            continue
        kind = param_values("Pooling", op.params).get("pooling_type", 0)
        op.params = make_params("Pooling", pooling_type=kind, global_pooling=1)
        _compact(op.outputs[0], channels)
        legalizer.spread(op.outputs[0], channels)
