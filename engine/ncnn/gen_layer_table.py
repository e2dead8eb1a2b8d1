"""Regenerate :mod:`engine.ncnn.layer_table` from the ncnn sources.

Usage::

    python -m engine.ncnn.gen_layer_table [--ncnn DIR] [--check]

``DIR`` is a Tencent/ncnn checkout or bare git repository (default: the local mirror). The
runtime decides: params (ids, names, defaults, kinds) are read from every
``src/layer/<layer>.cpp`` ``load_param`` (``x = pd.get(id, default)``); names follow
``docs/developer-guide/operators.md`` where it lists the same id. Weights (load order, tagged or
raw fp32, sizes and conditions) are written by hand below in :data:`WEIGHTS` and checked
against the sequence of ``mb.load(..., type)`` calls in each ``load_model``. Every place where
operators.md disagrees with the runtime is recorded in the layer's ``notes``.
``--check`` compares instead of writing (exit 1 when the table is stale).
"""
from __future__ import annotations

import argparse
import logging
import pprint
import re
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_NCNN = "/work/.mirror/Tencent+ncnn/repo"
OUT = Path(__file__).with_name("layer_table.py")
FLT_MAX = 3.4028234663852886e38

#: Array params holding floats (all other arrays hold ints); from how each layer reads them.
FLOAT_ARRAYS = {
    "activation_params", "coeffs", "min_sizes", "max_sizes", "aspect_ratios", "biases", "mask",
    "anchors_scale",
}

#: Defaults the runtime computes from other params, as expressions of :mod:`engine.ncnn.expr`.
EXPR_DEFAULTS = {
    ("MultiHeadAttention", 6): ("float", "1.0 / sqrt(embed_dim // num_heads)"),
    ("InverseSpectrogram", 2): ("int", "n_fft // 4"),
    ("Spectrogram", 2): ("int", "n_fft // 4"),
}

#: Values the builder writes unless told otherwise (ncnn refuses params without them).
BUILDER_DEFAULTS = {
    "Softmax": {"fixbug0": 1},
    "Reduction": {"fixbug0": 1},
}

#: Param settings the writer cannot produce weights for (reason shown to the user).
UNSUPPORTED = {
    "Gemm": [["quantize_term >= 400", "weight block quantization (quantize_term >= 400)"]],
    "MultiHeadAttention": [["quantize_term >= 400", "weight block quantization (quantize_term >= 400)"]],
    "MemoryData": [["load_type not in (0, 1)", "load_type other than 0 (tagged) or 1 (raw fp32)"]],
}

#: Params every layer understands (read by Net::load_param itself).
COMMON_PARAMS = [
    {"id": 30, "name": "shape_hints", "kind": "int_array", "default": (), "doc": "output shape hints"},
    {"id": 31, "name": "featmask", "kind": "int", "default": 0, "doc": "bit mask of features to disable"},
]


def _w(name, size, when=None, tagged=False):
    d = {"name": name, "tagged": tagged, "size": size}
    if when is not None:
        d["when"] = when
    return d


def _conv_weights(dynamic=True, int8=None):
    nd = " and not dynamic_weight" if dynamic else ""
    ws = [_w("weight_data", "weight_data_size", "not dynamic_weight" if dynamic else None, True),
          _w("bias_data", "num_output", "bias_term" + nd)]
    return ws + (int8 or [])


_CONV_INT8 = [
    _w("weight_data_int8_scales", "num_output", "int8_scale_term != 0 and not dynamic_weight"),
    _w("bottom_blob_int8_scales", "1", "int8_scale_term != 0 and not dynamic_weight"),
    _w("top_blob_int8_scales", "1", "int8_scale_term > 100 and not dynamic_weight"),
]
_CONVDW_INT8 = [
    _w("weight_data_int8_scales", "group if int8_scale_term in (1, 101) else 1",
       "int8_scale_term in (1, 101, 2, 102) and not dynamic_weight"),
    _w("bottom_blob_int8_scales", "1", "int8_scale_term in (1, 101, 2, 102) and not dynamic_weight"),
    _w("top_blob_int8_scales", "1", "int8_scale_term > 100 and not dynamic_weight"),
]
_NORM_AFFINE = lambda size: [_w("gamma_data", size, "affine"), _w("beta_data", size, "affine")]  # noqa: E731
_ND = "(2 if direction == 2 else 1)"

#: Weights in load order. ``tagged``: loaded with ``mb.load(n, 0)`` (4-byte type tag, fp32 or
#: fp16 data); otherwise ``mb.load(n, 1)`` (raw fp32, no tag). ``size``: element count;
#: ``when``: condition on params (absent = always loaded).
WEIGHTS = {
    "BatchNorm": [_w(n, "channels") for n in ("slope_data", "mean_data", "var_data", "bias_data")],
    "Bias": [_w("bias_data", "bias_data_size")],
    "Convolution": _conv_weights(True, _CONV_INT8),
    "Convolution1D": _conv_weights(True),
    "Convolution3D": _conv_weights(False),
    "ConvolutionDepthWise": _conv_weights(True, _CONVDW_INT8),
    "ConvolutionDepthWise1D": _conv_weights(True),
    "ConvolutionDepthWise3D": _conv_weights(False),
    "Deconvolution": _conv_weights(True),
    "Deconvolution1D": _conv_weights(True),
    "Deconvolution3D": _conv_weights(False),
    "DeconvolutionDepthWise": _conv_weights(True),
    "DeconvolutionDepthWise1D": _conv_weights(True),
    "DeconvolutionDepthWise3D": _conv_weights(False),
    "DeformableConv2D": _conv_weights(False),
    "Dequantize": [_w("scale_data", "scale_data_size"), _w("bias_data", "bias_data_size", "bias_data_size != 0")],
    "Embed": [_w("weight_data", "weight_data_size", None, True), _w("bias_data", "num_output", "bias_term"),
              _w("weight_data_int8_scale", "1", "int8_scale_term != 0")],
    "Gemm": [
        _w("A_data", "constantM * constantK", "constantA", True),
        _w("B_data", "constantN * constantK", "constantB", True),
        _w("C_data", "1 if constant_broadcast_type_C == 0 else constantM if constant_broadcast_type_C in (1, 2)"
           " else constantN * constantM if constant_broadcast_type_C == 3 else constantN",
           "constantC and constant_broadcast_type_C != -1", True),
        _w("A_data_int8_scales", "constantM", "quantize_term != 0 and constantA"),
        _w("B_data_int8_scale", "1", "quantize_term != 0 and constantB"),
    ],
    "GroupNorm": _NORM_AFFINE("channels"),
    "GRU": [
        _w("weight_xc_data", f"(weight_data_size // {_ND} // num_output // 3) * num_output * 3 * {_ND}", None, True),
        _w("bias_c_data", f"num_output * 4 * {_ND}", None, True),
        _w("weight_hc_data", f"num_output * num_output * 3 * {_ND}", None, True),
        _w("weight_xc_data_int8_scales", f"num_output * 3 * {_ND}", "int8_scale_term != 0"),
        _w("weight_hc_data_int8_scales", f"num_output * 3 * {_ND}", "int8_scale_term != 0"),
    ],
    "InnerProduct": [
        _w("weight_data", "weight_data_size", None, True), _w("bias_data", "num_output", "bias_term"),
        _w("weight_data_int8_scales", "num_output", "int8_scale_term != 0"),
        _w("bottom_blob_int8_scales", "1", "int8_scale_term != 0"),
    ],
    "InstanceNorm": _NORM_AFFINE("channels"),
    "LayerNorm": _NORM_AFFINE("affine_size"),
    "LSTM": [
        _w("weight_xc_data", f"(weight_data_size // {_ND} // hidden_size // 4) * hidden_size * 4 * {_ND}",
           None, True),
        _w("bias_c_data", f"hidden_size * 4 * {_ND}", None, True),
        _w("weight_hc_data", f"num_output * hidden_size * 4 * {_ND}", None, True),
        _w("weight_hr_data", f"hidden_size * num_output * {_ND}", "num_output != hidden_size", True),
        _w("weight_xc_data_int8_scales", f"hidden_size * 4 * {_ND}", "int8_scale_term != 0"),
        _w("weight_hc_data_int8_scales", f"hidden_size * 4 * {_ND}", "int8_scale_term != 0"),
    ],
    "MemoryData": [_w("data", "w * h * d * c if d != 0 else w * h * c if c != 0 else w * h if h != 0 else w",
                      "w != 0 or h != 0 or d != 0 or c != 0", "load_type == 0")],
    "MultiHeadAttention": [
        _w("q_weight_data", "embed_dim * (weight_data_size // embed_dim)", None, True),
        _w("q_bias_data", "embed_dim"),
        _w("k_weight_data", "embed_dim * kdim", None, True),
        _w("k_bias_data", "embed_dim"),
        _w("v_weight_data", "embed_dim * vdim", None, True),
        _w("v_bias_data", "embed_dim"),
        _w("out_weight_data", "(weight_data_size // embed_dim) * embed_dim", None, True),
        _w("out_bias_data", "weight_data_size // embed_dim"),
        _w("q_weight_data_int8_scales", "embed_dim", "quantize_term != 0"),
        _w("k_weight_data_int8_scales", "embed_dim", "quantize_term != 0"),
        _w("v_weight_data_int8_scales", "embed_dim", "quantize_term != 0"),
        _w("out_weight_data_int8_scale", "1", "quantize_term != 0"),
    ],
    "Normalize": [_w("scale_data", "scale_data_size")],
    "Padding": [_w("per_channel_pad_data", "per_channel_pad_data_size", "per_channel_pad_data_size != 0")],
    "PReLU": [_w("slope_data", "num_slope")],
    "Quantize": [_w("scale_data", "scale_data_size")],
    "Requantize": [_w("scale_in_data", "scale_in_data_size"), _w("scale_out_data", "scale_out_data_size"),
                   _w("bias_data", "bias_data_size", "bias_data_size != 0")],
    "RMSNorm": [_w("gamma_data", "affine_size", "affine")],
    "RNN": [
        _w("weight_xc_data", f"(weight_data_size // {_ND} // num_output) * num_output * {_ND}", None, True),
        _w("bias_c_data", f"num_output * {_ND}", None, True),
        _w("weight_hc_data", f"num_output * num_output * {_ND}", None, True),
        _w("weight_xc_data_int8_scales", f"num_output * {_ND}", "int8_scale_term != 0"),
        _w("weight_hc_data_int8_scales", f"num_output * {_ND}", "int8_scale_term != 0"),
    ],
    "Scale": [_w("scale_data", "scale_data_size", "scale_data_size != -233"),
              _w("bias_data", "scale_data_size", "bias_term and scale_data_size != -233")],
}


# ---------------------------------------------------------------------------- source access
class Source:
    """Files of an ncnn checkout or bare git repository."""

    def __init__(self, root: str):
        self.root = Path(root)
        self.bare = not (self.root / "src").is_dir()

    def read(self, path: str) -> str:
        if not self.bare:
            return (self.root / path).read_text(encoding="utf-8")
        return subprocess.run(["git", "-C", str(self.root), "show", f"HEAD:{path}"], check=True,
                              capture_output=True, text=True).stdout

    def list(self, folder: str) -> list[str]:
        if not self.bare:
            return sorted(p.name for p in (self.root / folder).iterdir())
        out = subprocess.run(["git", "-C", str(self.root), "ls-tree", "--name-only", f"HEAD:{folder}"],
                             check=True, capture_output=True, text=True).stdout
        return sorted(out.split())

    def revision(self) -> str:
        try:
            return subprocess.run(["git", "-C", str(self.root), "rev-parse", "HEAD"], check=True,
                                  capture_output=True, text=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "unknown"


def _function_body(src: str, cls: str, fn: str) -> str | None:
    m = re.search(rf"int {cls}::{fn}\([^)]*\)\s*\{{", src)
    if not m:
        return None
    i, depth = m.end(), 1
    while depth:
        depth += {"{": 1, "}": -1}.get(src[i], 0)
        i += 1
    return src[m.end():i - 1]


# ---------------------------------------------------------------------------- operators.md
def parse_operators_md(text: str) -> dict[str, dict]:
    """``{layer: {"params": {id: {name, type, default, doc}}, "weights": [(name, type, shape)]}}``"""
    out: dict[str, dict] = {}
    cur = None
    table = None
    for line in text.splitlines():
        if line.startswith("# "):
            cur = out.setdefault(line[2:].strip(), {"params": {}, "weights": []})
            table = None
            continue
        if cur is None or not line.startswith("|"):
            table = None if not line.strip() else table
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "param id":
            table = "params"
        elif cells[0] == "weight":
            table = "weights"
        elif set(cells[0]) <= set("-: "):
            continue
        elif table == "params" and cells[0].lstrip("-").isdigit():
            cur["params"][int(cells[0])] = {"name": cells[1], "type": cells[2], "default": cells[3],
                                            "doc": cells[4] if len(cells) > 4 else ""}
        elif table == "weights":
            cur["weights"].append((cells[0], cells[1], cells[2] if len(cells) > 2 else ""))
    return out


# ---------------------------------------------------------------------------- load_param
_GET = re.compile(r"(?:\b(?:int|float|bool|Mat|std::string)\s+)?([A-Za-z_]\w*(?:\[\d+\])?)\s*=\s*"
                  r"pd\.get\(\s*(\d+)\s*,\s*(.+?)\);")
_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?f?$")


def _literal(text: str):
    t = text.strip()
    if _INT.match(t):
        return "int", int(t)
    if t in ("false", "true"):
        return "int", int(t == "true")
    if t in ("FLT_MAX", "-FLT_MAX"):
        return "float", -FLT_MAX if t.startswith("-") else FLT_MAX
    if _FLOAT.match(t) and ("." in t or t.endswith("f")):
        return "float", float(t.rstrip("f"))
    if t == "Mat()":
        return "array", ()
    if t == '""':
        return "str", ""
    if re.fullmatch(r"[A-Za-z_]\w*", t):
        return "ref", t
    return "expr", t


def parse_load_param(layer: str, body: str) -> list[dict]:
    params: dict[int, dict] = {}
    for m in _GET.finditer(body):
        name, pid, default = m.group(1), int(m.group(2)), m.group(3)
        if pid in params:
            continue
        kind, value = _literal(default)
        params[pid] = {"id": pid, "name": re.sub(r"\[(\d+)\]", r"_\1", name), "kind": kind, "default": value}
    by_name = {p["name"]: p for p in params.values()}
    for p in params.values():
        if p["kind"] == "ref":
            ref = by_name.get(p["default"])
            if ref is None:
                raise SystemExit(f"{layer}: param {p['id']} defaults to unknown {p['default']!r}")
            p["kind"], p["default"] = ref["kind"], {"ref": ref["name"]}
        elif p["kind"] == "expr":
            if (layer, p["id"]) not in EXPR_DEFAULTS:
                raise SystemExit(f"{layer}: param {p['id']} has a computed default {p['default']!r}; "
                                 "add it to EXPR_DEFAULTS")
            p["kind"], expr = EXPR_DEFAULTS[(layer, p["id"])]
            p["default"] = {"expr": expr}
        elif p["kind"] == "array":
            p["kind"] = "float_array" if p["name"] in FLOAT_ARRAYS else "int_array"
    return [params[k] for k in sorted(params)]


# ---------------------------------------------------------------------------- load_model
_LOAD = re.compile(r"([A-Za-z_]\w*)\s*=\s*mb\.load\((.*?)\)(?:\[0\])?;")


def parse_load_model(body: str | None) -> list[tuple[str, int]]:
    """``[(member, type)]`` in load order, without the NCNN_WEIGHT_QUANT branches."""
    if not body:
        return []
    body = re.sub(r"#if NCNN_WEIGHT_QUANT.*?#endif[^\n]*", "", body, flags=re.S)
    seen: dict[str, int] = {}
    for m in _LOAD.finditer(body):
        member, args = m.group(1), [a.strip() for a in m.group(2).split(",")]
        t = args[-1]
        seen.setdefault(member, int(t) if t.isdigit() else -1)
    return list(seen.items())


# ---------------------------------------------------------------------------- merge
def _norm(s: str) -> str:
    return s.replace(" ", "").lower()


def build(src: Source) -> tuple[dict, list[str]]:
    docs = parse_operators_md(src.read("docs/developer-guide/operators.md"))
    problems: list[str] = []
    layers: dict[str, dict] = {}
    for fname in src.list("src/layer"):
        if not fname.endswith(".h"):
            continue
        header = src.read(f"src/layer/{fname}")
        m = re.search(r"^class (\w+) : public Layer", header, re.M)
        if not m:
            continue
        cls = m.group(1)
        cpp = src.read(f"src/layer/{fname[:-2]}.cpp")
        params = parse_load_param(cls, _function_body(cpp, cls, "load_param") or "")
        doc = docs.get(cls, {"params": {}, "weights": []})
        notes = []
        if cls not in docs:
            notes.append("not described in operators.md")
        for p in params:
            d = doc["params"].get(p["id"])
            if d is None:
                notes.append(f"param {p['id']} ({p['name']}) is read by the runtime but not in operators.md")
                continue
            if _norm(d["name"]) != _norm(p["name"]):
                if not re.fullmatch(r"\w+", d["name"]):
                    notes.append(f"param {p['id']}: operators.md name {d['name']!r}, runtime {p['name']!r}")
                else:
                    p["name"] = d["name"]
            if d["doc"]:
                p["doc"] = d["doc"]
            doc_kind = {"int": "int", "float": "float", "array": "array", "str": "str"}.get(d["type"], d["type"])
            if doc_kind != p["kind"].replace("int_", "").replace("float_", ""):
                notes.append(f"param {p['id']} ({p['name']}): operators.md type {d['type']!r}, runtime {p['kind']}")
            notes += _compare_default(p, d)
        read_ids = {p["id"] for p in params}
        for pid, d in sorted(doc["params"].items()):
            if pid not in read_ids:
                notes.append(f"param {pid} ({d['name']}) is in operators.md but the runtime never reads it")
        weights = WEIGHTS.get(cls, [])
        loads = parse_load_model(_function_body(cpp, cls, "load_model"))
        got = [(w["name"], w["tagged"]) for w in weights]
        want = [(n, t == 0 if t in (0, 1) else "load_type == 0") for n, t in loads]
        if got != want:
            problems.append(f"{cls}: WEIGHTS {got} but load_model loads {want}")
        for dname, dtype, _shape in doc["weights"]:
            match = [w for w in weights if w["name"] == dname or w["name"].startswith(dname.rstrip("s"))]
            tagged_doc = "fp16" in dtype
            if match and match[0]["tagged"] is not True and tagged_doc:
                notes.append(f"weight {dname}: operators.md says {dtype}, the runtime loads it raw fp32")
            if match and match[0]["tagged"] is True and not tagged_doc:
                notes.append(f"weight {dname}: operators.md says {dtype}, the runtime loads it tagged (fp16 allowed)")
        entry = {"params": params, "weights": weights, "notes": notes}
        if cls in BUILDER_DEFAULTS:
            entry["builder_defaults"] = BUILDER_DEFAULTS[cls]
        if cls in UNSUPPORTED:
            entry["unsupported"] = UNSUPPORTED[cls]
        layers[cls] = entry
    for cls in WEIGHTS:
        if cls not in layers:
            problems.append(f"WEIGHTS names unknown layer {cls}")
    return dict(sorted(layers.items())), problems


def _compare_default(p: dict, d: dict) -> list[str]:
    dd = d["default"].strip()
    ours = p["default"]
    if isinstance(ours, dict):
        ref = ours.get("ref") or ours.get("expr")
        return [] if _norm(ref) == _norm(dd) or "expr" in ours else \
            [f"param {p['id']} ({p['name']}): operators.md default {dd!r}, runtime {ref!r}"]
    kind, val = _literal(dd.replace("[ ]", "Mat()").replace("[]", "Mat()"))
    if kind == "array" and isinstance(ours, tuple):
        return []
    if kind in ("int", "float") and isinstance(ours, (int, float)) and abs(float(val) - float(ours)) <= 1e-6 * max(1.0, abs(float(ours))):
        return []
    if kind == "str" and ours == "":
        return []
    return [f"param {p['id']} ({p['name']}): operators.md default {dd!r}, runtime {ours!r}"]


def render(layers: dict, revision: str) -> str:
    body = pprint.pformat(layers, width=110, sort_dicts=False)
    common = pprint.pformat(COMMON_PARAMS, width=110, sort_dicts=False)
    return (f'"""The ncnn layer table (all {len(layers)} layers of the runtime): params and weights.\n\n'
            "GENERATED by ``python -m engine.ncnn.gen_layer_table`` from Tencent/ncnn\n"
            f"{revision} (``src/layer/*.cpp`` load_param/load_model, ``docs/developer-guide/operators.md``).\n"
            "Do not edit by hand: change the generator and run it again. Read through\n"
            ':mod:`engine.ncnn.layers`."""\n\n'
            f"NCNN_REVISION = {revision!r}\n\n"
            f"COMMON_PARAMS = {common}\n\n"
            f"LAYERS = {body}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ncnn", default=DEFAULT_NCNN, help="ncnn checkout or bare git repository")
    ap.add_argument("--check", action="store_true", help="only check that the table is up to date")
    args = ap.parse_args(argv)
    src = Source(args.ncnn)
    layers, problems = build(src)
    for p in problems:
        print("error:", p, file=sys.stderr)
    if problems:
        return 1
    text = render(layers, src.revision())
    if args.check:
        stale = not OUT.exists() or OUT.read_text(encoding="utf-8") != text
        print("layer table is stale" if stale else "layer table is up to date")
        return int(stale)
    OUT.write_text(text, encoding="utf-8")
    n_notes = sum(len(v["notes"]) for v in layers.values())
    print(f"wrote {OUT} ({len(layers)} layers, {n_notes} notes where operators.md and the runtime differ)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
