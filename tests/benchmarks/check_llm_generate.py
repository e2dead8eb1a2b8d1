"""Decoder-only LLMs through pt2ncnn: greedy generation in ncnn against PyTorch, and speed.

Run with the benchmark virtualenv (torch 2.14.1, transformers, ncnn), never in CI::

    PYTHONPATH=. /work/benchvenv/bin/python tests/benchmarks/check_llm_generate.py [--families LLaMA,Qwen2] [--speed]

Every family is a small causal LM with seeded random weights (``initializer_range`` 0.5 so that
greedy decoding does not repeat one token) and tied embeddings: Hugging Face ``LlamaForCausalLM``,
``Qwen2ForCausalLM``, ``Qwen3ForCausalLM`` and ``MistralForCausalLM`` built from configs (wrapped
by :func:`engine.llm.transformers_adapter.flat_cache_lm`), and the plain-PyTorch decoder of the
tests. Each is exported with :func:`engine.llm.export_decoder` (prefill + decode in one
``.pt2``, max length 64), converted with fp32 weights (``engine.llm.generate.convert_decoder``)
and run in ncnn (fp32, one thread):

* greedy generation of 32 tokens after a 5-token prompt: the token sequence must equal PyTorch's
  greedy decoding of the same module, and the logits of every step match (relative error =
  max |ncnn − PyTorch| / max |PyTorch| ≤ 1e-4);
* the prefill program at a second prompt length (11) matches too.

``--speed`` also times decoding (64 new tokens after a 16-token prompt, one thread) of a larger
LLaMA config (hidden 512, 8 layers, vocab 8192) in ncnn and in PyTorch eager, and reports tokens/s.

Writes ``tests/benchmarks/results/llm_generate.md`` and ``.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "tests" / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.llm import export_decoder  # noqa: E402
from engine.llm.generate import NcnnDecoder, convert_decoder, greedy  # noqa: E402
from engine.llm.transformers_adapter import flat_cache_lm  # noqa: E402

TOL, PROMPT, NEW, MAX_LENGTH = 1e-4, [5, 9, 3, 17, 2], 32, 64
SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
             vocab_size=96, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2,
             tie_word_embeddings=True, initializer_range=0.5)


def _hf(config_cls: str, model_cls: str, **kw):
    def build(size: dict):
        import transformers as T
        torch.manual_seed(0)
        return flat_cache_lm(getattr(T, model_cls)(getattr(T, config_cls)(**{**size, **kw})))
    return build


def _plain(size: dict):
    from tests.engine.llm.decoder import TinyDecoder
    torch.manual_seed(0)
    return TinyDecoder(vocab=size["vocab_size"])


FAMILIES = {
    "LLaMA": _hf("LlamaConfig", "LlamaForCausalLM"),
    "Qwen2": _hf("Qwen2Config", "Qwen2ForCausalLM"),
    "Qwen3": _hf("Qwen3Config", "Qwen3ForCausalLM", head_dim=8),
    "Mistral": _hf("MistralConfig", "MistralForCausalLM", sliding_window=None),
    "plain decoder": _plain,
}
SPEED = dict(SMALL, hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2,
             intermediate_size=1408, vocab_size=8192, initializer_range=0.02)


def rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-6))


def torch_greedy(model, prompt: list[int], n: int) -> tuple[list[int], list[np.ndarray], float]:
    """Greedy tokens, the logits of each step and the decode seconds of PyTorch eager."""
    tokens, logits = [], []
    with torch.no_grad():
        out, *cache = model(torch.tensor([prompt]))
        last = out[0, -1]
        t0 = time.perf_counter()
        for k in range(n):
            tokens.append(int(last.argmax()))
            logits.append(last.numpy().copy())
            if k + 1 < n:
                out, *cache = model(torch.tensor([[tokens[-1]]]), *cache)
                last = out[0, -1]
        return tokens, logits, time.perf_counter() - t0


def check(name: str, build, tmp: Path) -> dict:
    model = build(SMALL)
    row = {"family": name}
    t0 = time.perf_counter()
    pt2 = export_decoder(model, tmp / f"{name.replace(' ', '_')}.pt2", max_length=MAX_LENGTH)
    row["export_s"] = round(time.perf_counter() - t0, 2)
    converted = convert_decoder(pt2, tmp)
    row["convert_s"] = round(converted.seconds, 2)
    row["decode_layers"] = converted.decode.layers
    dec = NcnnDecoder(converted)
    want_tokens, want_logits, _ = torch_greedy(model, PROMPT, NEW)
    got = greedy(dec, PROMPT, NEW)
    row["distinct_tokens"] = len(set(want_tokens))
    row["tokens_equal"] = got.tokens == want_tokens
    row["max_step_rel"] = max(rel(g, w) for g, w in zip(got.logits, want_logits))
    ids = torch.randint(0, SMALL["vocab_size"], (1, 11), generator=torch.Generator().manual_seed(11))
    logits, _ = dec.prefill(ids[0].tolist())
    with torch.no_grad():
        row["prefill11_rel"] = rel(logits, model(ids)[0][0].numpy())
    row["ok"] = row["tokens_equal"] and row["max_step_rel"] <= TOL and row["prefill11_rel"] <= TOL
    return row


def speed(tmp: Path) -> dict:
    """Tokens per second of the ncnn decode loop and of PyTorch eager, at 1 and 2 threads."""
    model = FAMILIES["LLaMA"](SPEED)
    prompt, n = list(range(3, 19)), 64
    pt2 = export_decoder(model, tmp / "speed.pt2", max_length=128)
    converted = convert_decoder(pt2, tmp)
    out = {"config": "LLaMA hidden 512, 8 layers, 8 heads / 2 kv heads, vocab 8192", "prompt": len(prompt),
           "new_tokens": n, "load_average": round(os.getloadavg()[0], 1), "threads": {}}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        dec = NcnnDecoder(converted, threads=threads)
        greedy(dec, prompt, 4)  # warm-up
        got = greedy(dec, prompt, n)
        torch_greedy(model, prompt, 4)
        want_tokens, _, torch_s = torch_greedy(model, prompt, n)
        out["threads"][threads] = {"ncnn_tokens_per_s": round(got.decode_tokens_per_second, 1),
                                   "torch_eager_tokens_per_s": round((n - 1) / torch_s, 1),
                                   "tokens_equal": got.tokens == want_tokens,
                                   "ncnn_prefill_ms": round(got.prefill_seconds * 1e3, 1)}
    torch.set_num_threads(1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", help="comma-separated subset of: " + ", ".join(FAMILIES))
    ap.add_argument("--speed", action="store_true", help="also time decoding of a larger LLaMA config")
    args = ap.parse_args()
    names = args.families.split(",") if args.families else list(FAMILIES)
    rows, result = [], {"torch": torch.__version__}
    with tempfile.TemporaryDirectory() as d:
        for name in names:
            try:
                rows.append(check(name, FAMILIES[name], Path(d)))
            except Exception as e:  # noqa: BLE001 - one failing family is a row, not the end of the run
                rows.append({"family": name, "ok": False, "error": f"{type(e).__name__}: {e}"})
            print(json.dumps(rows[-1]), flush=True)
        if args.speed:
            result["speed"] = speed(Path(d))
            print(json.dumps(result["speed"]), flush=True)
    result["families"] = rows
    write(result)
    return 0 if all(r["ok"] for r in rows) else 1


def write(result: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "llm_generate.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["# Decoder LLMs: greedy generation in ncnn vs PyTorch", "",
             f"torch {result['torch']}; prompt {PROMPT}, {NEW} new tokens, fp32 weights, one thread; "
             f"match = same tokens and every step's logits within {TOL:g} (relative).", "",
             "| family | tokens equal | distinct tokens | max step rel | prefill(11) rel | convert s | ok |",
             "|---|---|---|---|---|---|---|"]
    for r in result["families"]:
        if "error" in r:
            lines.append(f"| {r['family']} | error: {r['error'][:120]} | | | | | no |")
            continue
        lines.append(f"| {r['family']} | {r['tokens_equal']} | {r['distinct_tokens']} | {r['max_step_rel']:.2e} | "
                     f"{r['prefill11_rel']:.2e} | {r['convert_s']} | {'yes' if r['ok'] else 'no'} |")
    if "speed" in result:
        s = result["speed"]
        lines += ["", f"Speed: {s['config']}; {s['prompt']}-token prompt, {s['new_tokens']} new tokens, greedy; "
                      f"load average {s['load_average']} at the start (2-core machine).", "",
                  "| threads | ncnn tokens/s | PyTorch eager tokens/s | ncnn / PyTorch | tokens equal | ncnn prefill ms |",
                  "|---|---|---|---|---|---|"]
        for threads, t in s["threads"].items():
            lines.append(f"| {threads} | {t['ncnn_tokens_per_s']} | {t['torch_eager_tokens_per_s']} | "
                         f"{t['ncnn_tokens_per_s'] / t['torch_eager_tokens_per_s']:.2f}× | {t['tokens_equal']} | "
                         f"{t['ncnn_prefill_ms']} |")
    (RESULTS / "llm_generate.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
