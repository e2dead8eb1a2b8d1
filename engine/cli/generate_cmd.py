"""``pt2ncnn generate``: greedy text generation with a decoder package in the ncnn runtime.

Converts the package's prefill and decode programs (made by :func:`engine.llm.export_decoder`)
to ``<stem>.prefill.ncnn.*`` and ``<stem>.decode.ncnn.*`` (in ``-o DIR``, else a temporary
folder removed afterwards), runs the prompt through the prefill program and then one decode
step per new token, always taking the most likely token, and prints the new token ids and the
speed. Needs ncnn. Exit codes: 0 done; 2 bad input (not a decoder package, a program that does
not convert, a prompt too long).
"""
from __future__ import annotations

import argparse
import json

NAME = "generate"
HELP = "greedy text generation with a decoder package (prefill + decode programs) in ncnn"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="the .pt2 package (made by engine.llm.export_decoder)")
    p.add_argument("--prompt-ids", metavar="IDS", required=True, help="the prompt's token ids, e.g. 1,2,3")
    p.add_argument("--max-new-tokens", type=int, default=32, metavar="N", help="how many tokens to generate (32)")
    p.add_argument("-o", "--output-dir", metavar="DIR",
                   help="keep the converted programs here (<stem>.prefill.ncnn.* / <stem>.decode.ncnn.*)")
    p.add_argument("--fp16", action="store_true", help="store the ncnn weights as fp16 (default fp32)")
    p.add_argument("--threads", type=int, default=1, metavar="N", help="ncnn threads (1)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _prompt(text: str) -> list[int]:
    from .main import UsageError

    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise UsageError(f"--prompt-ids: expected comma-separated integers, got {text!r}") from None
    if not ids or any(i < 0 for i in ids):
        raise UsageError("--prompt-ids: give at least one token id, none negative")
    return ids


def run(args) -> int:
    from engine.errors import PT2Error
    from engine.llm.generate import NcnnDecoder, convert_decoder, greedy

    from .main import UsageError

    prompt = _prompt(args.prompt_ids)
    if args.max_new_tokens < 1:
        raise UsageError("--max-new-tokens must be at least 1")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="pt2ncnn-generate-") as tmp:
        converted = convert_decoder(args.model, args.output_dir or tmp, fp16=args.fp16)
        vocab = converted.manifest.vocab_size
        if any(i >= vocab for i in prompt):
            raise UsageError(f"--prompt-ids: token ids must be below the vocabulary size {vocab}")
        decoder = NcnnDecoder(converted, threads=args.threads)
        try:
            out = greedy(decoder, prompt, args.max_new_tokens)
        except ValueError as e:
            raise PT2Error(str(e)) from None
    report = {"prompt": prompt, "tokens": out.tokens, "convert_seconds": round(converted.seconds, 3),
              "prefill_seconds": round(out.prefill_seconds, 6), "decode_seconds": round(out.decode_seconds, 6),
              "decode_tokens_per_second": round(out.decode_tokens_per_second, 1)}
    if args.json:
        print(json.dumps(report))
    else:
        print(",".join(str(t) for t in out.tokens))
        print(f"prefill {len(prompt)} tokens in {out.prefill_seconds * 1e3:.1f} ms; "
              f"{len(out.tokens)} new tokens, decode {out.decode_tokens_per_second:.1f} tokens/s "
              f"(converted in {converted.seconds:.2f} s)")
    return 0
