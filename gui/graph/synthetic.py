"""Synthetic IR graphs with a module hierarchy, of any size — for the big-graph tests and the
graph benchmark (``tests/benchmarks/bench_graph.py``), and to try the view on a graph larger
than any sample.

:func:`synthetic_graph` stacks blocks under ``encoder.layers.<i>`` until about ``n_nodes`` nodes
exist: transformer blocks (layer norms, an attention module with q/k/v projections, a softmax
and an output projection, an MLP module, two residual adds) alternating with convolution blocks
(conv-bn-relu twice in a ``body`` module, a shortcut add), each operator with its weights as
parameter nodes, and every operator's ``module_stack`` and provenance set as the ATen graph of
an exported model has them. Shapes are plausible, not checked; nothing here runs a model.
"""
from __future__ import annotations

from engine.ir import Graph, Operand, Provenance
from engine.reader.schema import ModuleFrame

_CLASSES = {
    "": "synthetic.Model",
    "encoder": "synthetic.Encoder",
    "encoder.layers": "torch.nn.modules.container.ModuleList",
    "attn": "synthetic.Attention",
    "mlp": "synthetic.MLP",
    "body": "torch.nn.modules.container.Sequential",
    "block": "synthetic.TransformerBlock",
    "conv": "synthetic.ConvBlock",
}


class _Builder:
    def __init__(self, seed: int) -> None:
        self.g = Graph()
        self.frames: dict[str, ModuleFrame] = {}
        self.stacks: dict[str, list[ModuleFrame]] = {}

    def frame(self, path: str, kind: str) -> ModuleFrame:
        f = self.frames.get(path)
        if f is None:
            f = self.frames[path] = ModuleFrame(path, path, _CLASSES.get(kind, "torch.nn.Module"))
        return f

    def stack(self, path: str, kinds: dict[str, str]) -> list[ModuleFrame]:
        s = self.stacks.get(path)
        if s is None:
            parts = path.split(".") if path else []
            s = [self.frame("", "")]
            for k in range(1, len(parts) + 1):
                p = ".".join(parts[:k])
                s.append(self.frame(p, kinds.get(p, p.rsplit(".", 1)[-1])))
            self.stacks[path] = s
        return s

    def op(self, type_: str, name: str, inputs: list[Operand], module: str, kinds: dict[str, str],
           shape: list[int], weights: tuple[str, ...] = ()) -> Operand:
        ins = list(inputs)
        for w in weights:  # parameters are placeholders: first in the graph, as in an export
            pname = f"p_{module.replace('.', '_')}_{w}"
            out = self.g.new_operand(pname, dtype="f32", shape=[shape[-1], shape[-1]])
            self.g.add_op("pnnx.Attribute", pname, [], [out], params={"target": f"{module}.{w}", "kind": "parameter"},
                          provenance=Provenance((pname,), (module,)))
            ins.append(out)
        out = self.g.new_operand(name, dtype="f32", shape=list(shape))
        o = self.g.add_op(type_, name, ins, [out], provenance=Provenance((name,), (module,)))
        o.meta["module_stack"] = self.stack(module, kinds)
        return out


def synthetic_graph(n_nodes: int, seed: int = 0, hidden: int = 256) -> Graph:
    """An ATen-like graph of about ``n_nodes`` nodes (see the module docstring)."""
    b = _Builder(seed)
    g = b.g
    x_out = g.new_operand("x", dtype="f32", shape=[1, 128, hidden])
    g.add_op("pnnx.Input", "x", [], [x_out])
    kinds: dict[str, str] = {"encoder": "encoder", "encoder.layers": "encoder.layers"}
    x = x_out
    i = 0
    while len(g.ops) < n_nodes - 8:
        base = f"encoder.layers.{i}"
        s = [1, 128, hidden]
        if i % 3 != 2:
            kinds[base] = "block"
            kinds[f"{base}.attn"] = "attn"
            kinds[f"{base}.mlp"] = "mlp"
            h = b.op("aten.layer_norm.default", f"layer_norm_{i}_1", [x], f"{base}.norm1", kinds, s, ("weight", "bias"))
            q = b.op("aten.linear.default", f"linear_q_{i}", [h], f"{base}.attn.q_proj", kinds, s, ("weight", "bias"))
            k = b.op("aten.linear.default", f"linear_k_{i}", [h], f"{base}.attn.k_proj", kinds, s, ("weight", "bias"))
            v = b.op("aten.linear.default", f"linear_v_{i}", [h], f"{base}.attn.v_proj", kinds, s, ("weight", "bias"))
            a = f"{base}.attn"
            q = b.op("aten.view.default", f"view_q_{i}", [q], a, kinds, [1, 128, 8, hidden // 8])
            k = b.op("aten.view.default", f"view_k_{i}", [k], a, kinds, [1, 128, 8, hidden // 8])
            v = b.op("aten.view.default", f"view_v_{i}", [v], a, kinds, [1, 128, 8, hidden // 8])
            q = b.op("aten.transpose.int", f"transpose_q_{i}", [q], a, kinds, [1, 8, 128, hidden // 8])
            k = b.op("aten.transpose.int", f"transpose_k_{i}", [k], a, kinds, [1, 8, hidden // 8, 128])
            v = b.op("aten.transpose.int", f"transpose_v_{i}", [v], a, kinds, [1, 8, 128, hidden // 8])
            sc = b.op("aten.matmul.default", f"matmul_qk_{i}", [q, k], a, kinds, [1, 8, 128, 128])
            sc = b.op("aten.mul.Tensor", f"mul_scale_{i}", [sc], a, kinds, [1, 8, 128, 128])
            sc = b.op("aten.softmax.int", f"softmax_{i}", [sc], a, kinds, [1, 8, 128, 128])
            o = b.op("aten.matmul.default", f"matmul_av_{i}", [sc, v], a, kinds, [1, 8, 128, hidden // 8])
            o = b.op("aten.transpose.int", f"transpose_o_{i}", [o], a, kinds, [1, 128, 8, hidden // 8])
            o = b.op("aten.reshape.default", f"reshape_o_{i}", [o], a, kinds, s)
            o = b.op("aten.linear.default", f"linear_o_{i}", [o], f"{a}.out_proj", kinds, s, ("weight", "bias"))
            x = b.op("aten.add.Tensor", f"add_attn_{i}", [x, o], base, kinds, s)
            h = b.op("aten.layer_norm.default", f"layer_norm_{i}_2", [x], f"{base}.norm2", kinds, s, ("weight", "bias"))
            m = f"{base}.mlp"
            h = b.op("aten.linear.default", f"linear_fc1_{i}", [h], f"{m}.fc1", kinds, [1, 128, 4 * hidden],
                     ("weight", "bias"))
            h = b.op("aten.gelu.default", f"gelu_{i}", [h], f"{m}.act", kinds, [1, 128, 4 * hidden])
            h = b.op("aten.linear.default", f"linear_fc2_{i}", [h], f"{m}.fc2", kinds, s, ("weight", "bias"))
            x = b.op("aten.add.Tensor", f"add_mlp_{i}", [x, h], base, kinds, s)
        else:
            kinds[base] = "conv"
            kinds[f"{base}.body"] = "body"
            y = b.op("aten.permute.default", f"permute_in_{i}", [x], base, kinds, [1, hidden, 128])
            y0 = y
            for j in (1, 2):
                y = b.op("aten.conv1d.default", f"conv_{i}_{j}", [y], f"{base}.body.conv{j}", kinds, [1, hidden, 128],
                         ("weight",))
                y = b.op("aten.batch_norm.default", f"bn_{i}_{j}", [y], f"{base}.body.bn{j}", kinds, [1, hidden, 128],
                         ("weight", "bias"))
                if j == 1:
                    y = b.op("aten.relu.default", f"relu_{i}_{j}", [y], f"{base}.body.relu{j}", kinds, [1, hidden, 128])
            y = b.op("aten.add.Tensor", f"add_short_{i}", [y, y0], base, kinds, [1, hidden, 128])
            y = b.op("aten.relu.default", f"relu_out_{i}", [y], base, kinds, [1, hidden, 128])
            x = b.op("aten.permute.default", f"permute_out_{i}", [y], base, kinds, [1, 128, hidden])
        i += 1
    h = b.op("aten.layer_norm.default", "layer_norm_final", [x], "norm", kinds, [1, 128, hidden], ("weight", "bias"))
    y = b.op("aten.linear.default", "linear_head", [h], "head", kinds, [1, 128, 1000], ("weight", "bias"))
    g.add_op("pnnx.Output", "output", [y], [])
    # parameters are placeholders: they come first, as in an exported program
    g.ops = ([o for o in g.ops if o.type == "pnnx.Attribute"] + [o for o in g.ops if o.type != "pnnx.Attribute"])
    return g
