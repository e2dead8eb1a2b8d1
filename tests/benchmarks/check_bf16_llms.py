"""Decoder LLMs saved in bfloat16 (how LLM weights ship): export ``model.to(torch.bfloat16)``,
convert, run in ncnn (fp32 arithmetic, fp32 weights) and compare with PyTorch twice — with the
bf16 model itself (PyTorch rounds every bf16 op; ncnn does not) and with a float32 copy holding
the same bf16 weights (what ncnn computes, but for the ops the graph itself casts to bf16).

Benchmark virtualenv (torch, transformers, ncnn), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_bf16_llms.py [--families LLaMA,Qwen3]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def check(family: str, work: Path) -> str:
    import numpy as np
    import torch

    from engine.convert import ConvertOptions, convert
    from tests.benchmarks.transformers_zoo import FAMILIES
    from tests.ncnn_runtime import run_layout

    case = FAMILIES[family][0](False)
    model = case.model.eval().to(torch.bfloat16)
    ep = torch.export.export(model, (), dict(case.inputs), strict=False)
    torch.export.save(ep, str(work / "m.pt2"))
    f32 = FAMILIES[family][0](False).model.eval()
    f32.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    with torch.no_grad():
        bf16_out = model(**case.inputs).last_hidden_state.float().numpy()
        f32_out = f32(**case.inputs).last_hidden_state.numpy()
    result = convert(str(work / "m.pt2"), ConvertOptions(fp16=False))
    if not result.ok:
        return f"| {family} | not converted: {result.errors[0]} | | |"
    result.write(work / "m.ncnn.param", work / "m.ncnn.bin")
    feeds = [t.numpy().astype(np.int32) for t in case.inputs.values()]
    got = run_layout(work / "m.ncnn.param", work / "m.ncnn.bin", feeds, result.ncnn.meta)[0].reshape(f32_out.shape)
    scale = float(np.abs(f32_out).max())
    return (f"| {family} | {result.layer_count} | {np.abs(got - f32_out).max() / scale:.1e} | "
            f"{np.abs(got - bf16_out).max() / scale:.1e} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="LLaMA,Mistral,Qwen2,Qwen3,Phi-3,Gemma,Gemma2,Gemma3,OLMo2,GLM-4,Granite")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    print("| family | ncnn layers | vs float32 PyTorch, same bf16 weights | vs bf16 PyTorch |")
    print("|---|---:|---:|---:|")
    for family in args.families.split(","):
        with tempfile.TemporaryDirectory() as d:
            try:
                print(check(family, Path(d)), flush=True)
            except Exception as e:  # one family's failure is a row, not the end of the run
                print(f"| {family} | {type(e).__name__}: {str(e)[:120]} | | |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
