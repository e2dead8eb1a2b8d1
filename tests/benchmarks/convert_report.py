"""Reading ncnn ``.param`` files for the conversion benchmark (layer counts, layer-type
histograms, unconverted pnnx/ATen lines) and rendering its records as markdown: the table with
ours/pnnx ratios and statuses, the targets of issues 3/4, and per model the diagnostics of a
failed conversion, the first diverging layer of a mismatch and the layer differences behind a
slower ncnn model."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from convert_steps import TOL_DEFAULT, TOL_FP32
from convert_zoo import ZOO

#: inference-time target of issue 3 (ours ≤ 1.05 × pnnx)
INFER_SLACK = 1.05


def param_layers(path: str | Path) -> int | None:
    """The layer count of an ncnn .param (first number of line 2), None if unreadable."""
    try:
        with open(path) as f:
            f.readline()
            return int(f.readline().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def param_types(path: str | Path) -> Counter:
    """How many layers of each type an ncnn .param holds."""
    types: Counter = Counter()
    with open(path) as f:
        lines = f.read().splitlines()[2:]
    for line in lines:
        if line.strip():
            types[line.split()[0]] += 1
    return types


def foreign_layers(types: Counter) -> dict[str, int]:
    """Layer types that are not ncnn layers (pnnx ops such as ``Tensor.reshape`` or ``aten::alias``
    left unconverted): ncnn refuses to load such a model."""
    return {t: n for t, n in types.items() if "." in t or "::" in t or t.startswith("pnnx")}


def compare_params(ours: str | Path, pnnx: str | Path) -> dict:
    """Per layer type, counts in ours and pnnx where they differ."""
    a, b = param_types(ours), param_types(pnnx)
    return {t: [a.get(t, 0), b.get(t, 0)] for t in sorted(set(a) | set(b)) if a.get(t, 0) != b.get(t, 0)}


# ------------------------------------------------------------------------------------- markdown

def _f(x, fmt: str = ".2f", none: str = "—") -> str:
    return none if x is None else format(x, fmt)


def _ratio(a, b) -> str:
    if a is None or b is None or not b:
        return "—"
    return f"{a / b:.2f}×"


def _err(x) -> str:
    if x is None:
        return "—"
    if x == float("inf"):
        return "inf"  # NaN/inf in the output, or a different element count
    return f"{x:.1e}"


def _get(d: dict | None, *path):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def ours_status(rec: dict) -> str:
    o = rec.get("ours", {})
    if not o.get("converted"):
        n = sum(g["count"] for g in (_get(o, "inprocess", "errors") or {}).values())
        return f"❌ convert ({n} ops)" if n else "❌ convert"
    return _match_status(o)


def _match_status(side: dict) -> str:
    """Loads and runs; default options within TOL_DEFAULT; fp32 weights with fp16 off within
    TOL_FP32 (the fp16-off run of the fp16-weight model when there is no fp32 one)."""
    chk = side.get("check", {})
    if chk.get("error"):
        return "❌ ncnn load/run"
    fp32 = side.get("check_fp32w", {}).get("fp32", chk.get("fp32", 1))
    parts = []
    if chk.get("default", 1) > TOL_DEFAULT:
        parts.append("❌ mismatch")
    if fp32 > TOL_FP32:
        parts.append("❌ fp32 mismatch" if not parts else "(fp32 too)")
    return " ".join(parts) or "✅"


def pnnx_status(rec: dict) -> str:
    p = rec.get("pnnx", {})
    if not p.get("converted"):
        return "❌ convert"
    if p.get("foreign"):
        return "❌ unconverted " + ", ".join(sorted(p["foreign"]))
    return _match_status(p)


def _errors(side: dict) -> str:
    return " / ".join(_err(_get(side, *k)) for k in (("check", "default"), ("check", "fp32"), ("check_fp32w", "fp32")))


def infer_ms(side: dict, threads: int) -> float | None:
    """The inference time compared: median CPU time for one thread (this thread's CPU time
    excludes preemption by other processes, which dominates wall time on a loaded machine),
    median wall time for more."""
    key = "cpu_median_ms" if threads == 1 else "median_ms"
    return _get(side, "time", str(threads), key)


def _time_cells(o: dict, p: dict, th: int) -> list[str]:
    oi, pi = infer_ms(o, th), infer_ms(p, th)
    cells = [_f(oi, ".1f"), _f(pi, ".1f"), _ratio(oi, pi)]
    if th == 1:  # the wall-time ratio, for reference
        wall = _ratio(_get(o, "time", "1", "median_ms"), _get(p, "time", "1", "median_ms"))
        cells[2] += f" (wall {wall})" if wall != "—" else ""
    return cells


def table(records: list[dict], threads: list[int]) -> str:
    t = threads[0]
    head = ["Model", "convert s ours", "pnnx", "ours/pnnx", "CPU s ours / pnnx", "ours in-proc CPU s",
            "layers ours", "pnnx", "ours/pnnx"]
    for th in threads:
        head += [f"infer {'CPU ' if th == 1 else ''}ms ours ({th}T)", "pnnx", "ours/pnnx"]
    head += ["rel err ours: default / fp16 off / fp32 w.", "pnnx: default / fp16 off / fp32 w.", "ours", "pnnx"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rec in records:
        o, p = rec.get("ours", {}), rec.get("pnnx", {})
        oc, pc = _get(o, "cli", "seconds"), _get(p, "cli", "seconds")
        ocpu, pcpu = _get(o, "cli", "cpu_seconds"), _get(p, "cli", "cpu_seconds")
        row = [rec.get("title", rec["model"]), _f(oc), _f(pc), _ratio(oc, pc),
               f"{_f(ocpu)} / {_f(pcpu)} = {_ratio(ocpu, pcpu)}",
               _f(_get(o, "inprocess", "convert_cpu_seconds")),
               _f(o.get("layers"), "d"), _f(p.get("layers"), "d"), _ratio(o.get("layers"), p.get("layers"))]
        for th in threads:
            row += _time_cells(o, p, th)
        row += [_errors(o), _errors(p),
                ours_status(rec), pnnx_status(rec)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def targets(records: list[dict], threads: list[int]) -> str:
    """How many models meet each target; layer count and inference are compared where pnnx's own
    model converts without foreign layers, i.e. ncnn loads it (nothing to compare against otherwise)."""
    n = len(records)
    ok = [r for r in records if ours_status(r) == "✅"]
    both = [r for r in records if r.get("pnnx", {}).get("converted") and not r["pnnx"].get("foreign")]
    failed = n - len(both)
    layers = [r for r in both if r.get("ours", {}).get("layers") is not None and r.get("pnnx", {}).get("layers")
              and r["ours"]["layers"] <= r["pnnx"]["layers"]]
    infer = [r for r in both if infer_ms(r.get("ours", {}), threads[0]) and infer_ms(r.get("pnnx", {}), threads[0])
             and infer_ms(r["ours"], threads[0]) <= INFER_SLACK * infer_ms(r["pnnx"], threads[0])]
    conv = [r for r in records if r.get("ours", {}).get("converted") and _get(r, "ours", "cli", "seconds")
            and _get(r, "pnnx", "cli", "seconds") and r["ours"]["cli"]["seconds"] <= r["pnnx"]["cli"]["seconds"]]
    where = f" (where pnnx's model loads; it fails on {failed})" if failed else ""
    return "\n".join([
        f"- converts and matches PyTorch (≤ {TOL_DEFAULT:g} default, ≤ {TOL_FP32:g} fp32 weights fp16 off): {len(ok)}/{n}",
        f"- layer count ≤ pnnx's: {len(layers)}/{len(both)}{where}",
        f"- ncnn inference ≤ {INFER_SLACK}× pnnx's ({threads[0]} thread): {len(infer)}/{len(both)}{where}",
        f"- conversion (whole process, converted models) ≤ pnnx's: {len(conv)}/{n}",
    ])


def _reasons(reasons: dict[str, int], most: int = 3) -> str:
    """The most frequent reasons with counts, each cut to 200 characters."""
    top = sorted(reasons.items(), key=lambda kv: -kv[1])
    text = "; ".join((r if len(r) <= 200 else r[:197] + "...") + (f" ×{c}" if c > 1 else "") for r, c in top[:most])
    return text + (f"; (+{len(top) - most} other reasons)" if len(top) > most else "")


def _diagnostics_md(rec: dict) -> list[str]:
    o = rec.get("ours", {})
    out = []
    errors = _get(o, "inprocess", "errors") or {}
    if errors:
        out.append("Unsupported / failed ATen operators (count, reasons, first nodes):")
        for op, g in errors.items():
            out.append(f"- `{op}` ×{g['count']}: {_reasons(g['reasons'])} (e.g. `{'`, `'.join(g['nodes'][:3])}`)")
    elif not o.get("converted"):
        err = _get(o, "inprocess", "error") or _get(o, "cli", "stderr") or "no diagnostics"
        out.append(f"- conversion failed: `{str(err).strip().splitlines()[-1][:300] if str(err).strip() else err}`")
        if _get(o, "inprocess", "ok"):
            out.append("- but the in-process conversion a moment later succeeded: the engine changed during the run")
    chk = o.get("check", {})
    fp32w = _get(o, "check_fp32w", "fp32")
    if chk.get("default", 0) > TOL_DEFAULT and fp32w is not None and fp32w <= TOL_FP32:
        out.append(f"- the conversion is exact (fp32 weights, fp16 off: {_err(fp32w)}); the error with default options "
                   f"comes from fp16 weight rounding (fp16 weights, fp16 arithmetic off: {_err(chk.get('fp32'))}); "
                   f"pnnx's model: {_errors(rec.get('pnnx', {}))}")
    if o.get("converted") and chk.get("error"):
        out.append(f"- ncnn: {chk['error']} {('`' + chk['stderr'].strip().splitlines()[-1][:200] + '`') if chk.get('stderr', '').strip() else ''}")
    div = o.get("divergence")
    if div:
        if div.get("error"):
            out.append(f"- divergence search failed: {div['error']}")
        elif div.get("first"):
            f = div["first"]
            out.append(f"- first diverging layer (fp32 weights, fp16 off, rel err > {TOL_FP32:g}): `{f['type']} {f['layer']}` "
                       f"(blob `{f['blob']}` vs ATen `{f['torch_node']}`, modules `{'`, `'.join(f.get('modules') or [''])}`): "
                       f"{f['rel_error']:.2e}; provenance {', '.join(f['provenance'])}")
        else:
            worst = div.get("worst") or [{}]
            out.append(f"- no single layer exceeds {TOL_FP32:g} ({div.get('compared')} blobs compared; worst "
                       f"`{worst[0].get('layer')}` {_err(worst[0].get('rel_error'))}): error accumulates")
    return out


def details(records: list[dict], threads: list[int]) -> str:
    out = []
    for rec in records:
        o, p = rec.get("ours", {}), rec.get("pnnx", {})
        items = _diagnostics_md(rec) if ours_status(rec) != "✅" else []
        oi, pi = infer_ms(o, threads[0]), infer_ms(p, threads[0])
        if oi and pi and oi > INFER_SLACK * pi or (o.get("layers") or 0) > (p.get("layers") or 10 ** 9):
            diff = rec.get("param_diff")
            if diff:
                items.append("- layer types ours vs pnnx (differing counts): "
                             + ", ".join(f"{k} {a}/{b}" for k, a, b in ((k, *v) for k, v in diff.items())))
            elif diff == {}:
                items.append(f"- inference {_ratio(oi, pi)} pnnx's with the same layer types and counts: compare the "
                             f"layers' params; if they agree, this is run-to-run noise (re-measure with "
                             f"`--models {rec['model']} --runs 40`)")
        oc, pc = _get(o, "cli", "seconds"), _get(p, "cli", "seconds")
        ip = o.get("inprocess", {})
        if oc and pc and oc > pc:
            items.append(f"- our conversion is slower: import {_f(ip.get('import_seconds'))} s, convert "
                         f"{_f(ip.get('convert_seconds'))} s, write {_f(ip.get('write_seconds'))} s; top passes "
                         + ", ".join(f"{x['name']} {x['seconds']:.2f}s" for x in ip.get("passes", [])[:4]))
        if p.get("foreign"):
            items.append("- pnnx left unconverted layers: " + ", ".join(f"{k} ×{v}" for k, v in p["foreign"].items()))
        if _get(p, "check", "error"):
            items.append(f"- pnnx's ncnn model: {p['check']['error']}")
        if items:
            out.append(f"### {rec.get('title', rec['model'])}\n" + "\n".join(items))
    return "\n\n".join(out) or "(nothing to report)"


def markdown(records: list[dict], env: dict) -> str:
    threads = env.get("threads", [1])
    return "\n\n".join([
        "# Conversion benchmark: pt2ncnn vs pnnx",
        "Generated by `tests/benchmarks/bench_convert.py`; do not edit by hand. Models are torchvision's with "
        "random seeded weights and calibrated BatchNorm statistics, input 1×3×224×224. Conversion time is the "
        "whole CLI process (`python -m engine.cli.main convert m.pt2 -o DIR` vs `pnnx m.pt inputshape=[1,3,224,224]`, "
        "which also writes its .pnnx.onnx/.py files), median of the repeats, wall time and CPU time (user + system "
        "of the process tree; pnnx's libtorch may use several threads); in-process is the CPU time of "
        "`engine.convert()` alone (no import, no writing). Inference: ncnn default options, the given thread count, runs of both models interleaved, median. "
        "Relative error = max |ncnn − PyTorch| / max |PyTorch| with ncnn's default options / fp16 storage and "
        "arithmetic off / fp16 off on a conversion with fp32 weights (`fp16=0`: isolates conversion errors from "
        f"fp16 weight rounding). Match = default ≤ {TOL_DEFAULT:g} and fp32 weights with fp16 off ≤ {TOL_FP32:g}.",
        table(records, threads),
        "## Targets (issue 3 §10, issue 4)\n" + targets(records, threads),
        "## Failures, mismatches and gaps\n" + details(records, threads),
        "## Environment\n" + "\n".join(f"- {k}: {v}" for k, v in env.items()),
    ]) + "\n"


def order(records: list[dict]) -> list[dict]:
    names = list(ZOO)
    return sorted(records, key=lambda r: names.index(r["model"]) if r["model"] in names else len(names))
