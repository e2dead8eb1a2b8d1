"""Big, realistic graphs for the scale benchmark (issue 13), exported with real ``torch.export``.

Two families, both plain torch with seeded random weights and small widths (the benchmark is
about graph size, not arithmetic):

* :class:`LlamaStack` — a decoder-only LLM as exported LLMs look: RMSNorm written out
  (``pow``/``mean``/``rsqrt``), q/k/v/o projections, rotary position embedding (slices, ``neg``,
  ``cat``), causal ``scaled_dot_product_attention``, SiLU-gated MLP, residuals; about 60 ATen
  nodes per layer, stacked to 1k–50k nodes.
* :class:`DetectionDAG` — a YOLO-style detector: Conv-BN-SiLU backbone of C2f blocks (``chunk``,
  bottlenecks, concatenation of every branch), SPPF, an FPN/PAN neck (upsample, concat) and
  three detection heads whose outputs are flattened and concatenated; the depth multiplier
  scales it.

:func:`export_model` writes ``<kind>_<target>.pt2`` (and the TorchScript trace
``<kind>_<target>.pt`` for the pnnx CLI anchor) under :data:`CACHE`, once; the number of layers
for a node target is fitted from two small exports. Run as a script to make them::

    PYTHONPATH=. .venv/bin/python tests/benchmarks/big_graphs.py llama:10000 detection:5000
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

CACHE = Path("/tmp/pt2ncnn-bench-scale")

#: the families and their input shape
INPUTS = {"llama": (1, 32, 64), "detection": (1, 3, 128, 128)}


def _torch():
    import torch

    return torch


def build(kind: str, depth: int):
    """The module of ``kind`` with ``depth`` layers (llama) / bottlenecks per C2f (detection)."""
    torch = _torch()
    from torch import nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, d: int, eps: float = 1e-6) -> None:
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d))

        def forward(self, x):
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    class Attention(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.heads, self.dh = heads, d // heads
            self.q_proj = nn.Linear(d, d, bias=False)
            self.k_proj = nn.Linear(d, d, bias=False)
            self.v_proj = nn.Linear(d, d, bias=False)
            self.o_proj = nn.Linear(d, d, bias=False)

        def forward(self, x, cos, sin):
            b, t, d = x.shape
            q = self.q_proj(x).view(b, t, self.heads, self.dh).transpose(1, 2)
            k = self.k_proj(x).view(b, t, self.heads, self.dh).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.heads, self.dh).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(a.transpose(1, 2).reshape(b, t, d))

    class MLP(nn.Module):
        def __init__(self, d: int, hidden: int) -> None:
            super().__init__()
            self.gate_proj = nn.Linear(d, hidden, bias=False)
            self.up_proj = nn.Linear(d, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, d, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class DecoderLayer(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.input_layernorm = RMSNorm(d)
            self.self_attn = Attention(d, heads)
            self.post_attention_layernorm = RMSNorm(d)
            self.mlp = MLP(d, 2 * d)

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            return x + self.mlp(self.post_attention_layernorm(x))

    class LlamaStack(nn.Module):
        def __init__(self, layers: int, d: int = 64, heads: int = 4, seq: int = 32) -> None:
            super().__init__()
            dh = d // heads
            inv = 1.0 / (10000 ** (torch.arange(0, dh, 2).float() / dh))
            ang = torch.outer(torch.arange(seq).float(), inv)
            emb = torch.cat((ang, ang), dim=-1)
            self.register_buffer("cos", emb.cos()[None, None], persistent=False)
            self.register_buffer("sin", emb.sin()[None, None], persistent=False)
            self.layers = nn.ModuleList(DecoderLayer(d, heads) for _ in range(layers))
            self.norm = RMSNorm(d)
            self.lm_head = nn.Linear(d, 100, bias=False)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x, self.cos, self.sin)
            return self.lm_head(self.norm(x))

    class Conv(nn.Sequential):
        def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1) -> None:
            super().__init__(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.SiLU())

    class Bottleneck(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.cv1, self.cv2 = Conv(c, c, 3), Conv(c, c, 3)

        def forward(self, x):
            return x + self.cv2(self.cv1(x))

    class C2f(nn.Module):
        def __init__(self, cin: int, cout: int, n: int) -> None:
            super().__init__()
            self.c = cout // 2
            self.cv1 = Conv(cin, 2 * self.c)
            self.m = nn.ModuleList(Bottleneck(self.c) for _ in range(n))
            self.cv2 = Conv((2 + n) * self.c, cout)

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            for m in self.m:
                y.append(m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.cv1, self.cv2 = Conv(c, c // 2), Conv(2 * c, c)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat((x, y1, y2, self.pool(y2)), 1))

    class Head(nn.Module):
        def __init__(self, c: int, classes: int) -> None:
            super().__init__()
            self.box = nn.Sequential(Conv(c, c, 3), Conv(c, c, 3), nn.Conv2d(c, 64, 1))
            self.cls = nn.Sequential(Conv(c, c, 3), Conv(c, c, 3), nn.Conv2d(c, classes, 1))

        def forward(self, x):
            return torch.cat((self.box(x), self.cls(x).sigmoid()), 1).flatten(2)

    class DetectionDAG(nn.Module):
        def __init__(self, n: int, w: int = 8, classes: int = 20) -> None:
            super().__init__()
            self.stem = nn.Sequential(Conv(3, w, 3, 2), Conv(w, 2 * w, 3, 2))
            self.stage2 = nn.Sequential(C2f(2 * w, 2 * w, n), Conv(2 * w, 4 * w, 3, 2))
            self.stage3 = nn.Sequential(C2f(4 * w, 4 * w, 2 * n), Conv(4 * w, 8 * w, 3, 2))
            self.stage4 = nn.Sequential(C2f(8 * w, 8 * w, 2 * n), Conv(8 * w, 8 * w, 3, 2))
            self.stage5 = nn.Sequential(C2f(8 * w, 8 * w, n), SPPF(8 * w))
            self.up = nn.Upsample(scale_factor=2.0, mode="nearest")
            self.top4 = C2f(16 * w, 8 * w, n)
            self.top3 = C2f(12 * w, 4 * w, n)
            self.down3 = Conv(4 * w, 4 * w, 3, 2)
            self.bot4 = C2f(12 * w, 8 * w, n)
            self.down4 = Conv(8 * w, 8 * w, 3, 2)
            self.bot5 = C2f(16 * w, 8 * w, n)
            self.heads = nn.ModuleList([Head(4 * w, classes), Head(8 * w, classes), Head(8 * w, classes)])

        def forward(self, x):
            x = self.stem(x)
            x = self.stage2(x)
            p3 = self.stage3[0](x)
            p4 = self.stage4[0](self.stage3[1](p3))
            p5 = self.stage5(self.stage4[1](p4))
            t4 = self.top4(torch.cat((self.up(p5), p4), 1))
            n3 = self.top3(torch.cat((self.up(t4), p3), 1))
            n4 = self.bot4(torch.cat((self.down3(n3), t4), 1))
            n5 = self.bot5(torch.cat((self.down4(n4), p5), 1))
            return torch.cat([h(f) for h, f in zip(self.heads, (n3, n4, n5))], 2)

    torch.manual_seed(0)
    if kind == "llama":
        return LlamaStack(depth).eval()
    if kind == "detection":
        m = DetectionDAG(depth)
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():  # BatchNorm statistics that are not the identity
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.running_mean.copy_(0.1 * torch.randn(mod.num_features, generator=g))
                    mod.running_var.copy_(1.0 + 0.2 * torch.rand(mod.num_features, generator=g))
        return m.eval()
    raise ValueError(f"unknown kind {kind!r} (known: {', '.join(INPUTS)})")


def example_input(kind: str):
    torch = _torch()
    return torch.randn(*INPUTS[kind], generator=torch.Generator().manual_seed(0))


def _export(kind: str, depth: int):
    torch = _torch()
    with torch.no_grad():
        return torch.export.export(build(kind, depth), (example_input(kind),))


def _node_count(ep) -> int:
    return sum(1 for n in ep.graph.nodes if n.op == "call_function")


def depth_for(kind: str, target: int) -> int:
    """The depth whose export has about ``target`` call nodes (a line through two small exports,
    cached in ``CACHE/depths.json``)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    fit_file = CACHE / "depths.json"
    fits = json.loads(fit_file.read_text()) if fit_file.exists() else {}
    if kind not in fits:
        a, b = (1, 3) if kind == "llama" else (1, 2)
        na, nb = _node_count(_export(kind, a)), _node_count(_export(kind, b))
        per = (nb - na) / (b - a)
        fits[kind] = [na - per * a, per]
        fit_file.write_text(json.dumps(fits))
    base, per = fits[kind]
    return max(1, round((target - base) / per))


def export_model(kind: str, target: int, *, trace: bool = False) -> Path:
    """``CACHE/<kind>_<target>.pt2`` (made once); with ``trace`` also the TorchScript trace
    ``<kind>_<target>.pt`` the pnnx CLI reads."""
    torch = _torch()
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{kind}_{target}.pt2"
    depth = depth_for(kind, target)
    if not path.exists():
        ep = _export(kind, depth)
        tmp = path.with_suffix(".tmp")
        torch.export.save(ep, str(tmp))
        tmp.replace(path)
    pt = path.with_suffix(".pt")
    if trace and not pt.exists():
        with torch.no_grad():
            traced = torch.jit.trace(build(kind, depth), (example_input(kind),), check_trace=False)
        tmp = pt.with_suffix(".pt.tmp")
        traced.save(str(tmp))
        tmp.replace(pt)
    return path


def main(argv: list[str]) -> int:
    for spec in argv or ["llama:1000"]:
        kind, _, target = spec.partition(":")
        p = export_model(kind, int(target), trace=True)
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
