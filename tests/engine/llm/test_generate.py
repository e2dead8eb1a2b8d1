"""Prefill and decode programs converted to ncnn: each matches PyTorch at several prompt and
cache lengths, and greedy generation in ncnn produces PyTorch's tokens and logits."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.llm import CacheLayoutError, export_decoder
from engine.llm.generate import NcnnDecoder, convert_decoder, greedy
from tests.engine.llm.decoder import TinyDecoder
from tests.harness import rel_error

TOL = 1e-4  # fp32 weights


@pytest.fixture(scope="module")
def converted(tiny_package, tmp_path_factory):
    return convert_decoder(tiny_package, tmp_path_factory.mktemp("ncnn"))


@pytest.fixture(scope="module")
def ncnn_decoder(converted):
    return NcnnDecoder(converted)


def test_both_programs_use_ncnns_attention_layers(converted):
    assert converted.prefill.param.name == "tiny.prefill.ncnn.param"
    assert converted.decode.param.name == "tiny.decode.ncnn.param"
    for p in (converted.prefill, converted.decode):
        for t in ("SDPA", "RotaryEmbed", "RMSNorm", "Embed"):
            assert p.layers.get(t), f"{p.name}: no {t} layer in {p.layers}"


@pytest.mark.parametrize("length", [1, 3, 11])
def test_prefill_matches_at_several_prompt_lengths(tiny_decoder, ncnn_decoder, length):
    ids = torch.randint(0, 64, (1, length), generator=torch.Generator().manual_seed(length))
    logits, cache = ncnn_decoder.prefill(ids[0].tolist())
    with torch.no_grad():
        want = [t.numpy() for t in tiny_decoder(ids)]
    assert rel_error(logits, want[0][0]) <= TOL
    assert len(cache) == 4
    for got, w in zip(cache, want[1:]):
        assert got.shape == w.shape and rel_error(got, w) <= TOL


@pytest.mark.parametrize("past", [1, 6, 40])
def test_decode_matches_at_several_cache_lengths(tiny_decoder, ncnn_decoder, past):
    g = torch.Generator().manual_seed(past)
    cache = [torch.randn(1, 2, past, 8, generator=g) for _ in range(4)]
    logits, new = ncnn_decoder.step(7, [c.numpy() for c in cache])
    with torch.no_grad():
        want = [t.numpy() for t in tiny_decoder(torch.tensor([[7]]), *cache)]
    assert rel_error(logits, want[0].reshape(-1)) <= TOL
    for got, w in zip(new, want[1:]):
        assert got.shape == (1, 2, past + 1, 8) and rel_error(got, w) <= TOL


def torch_greedy(model, prompt: list[int], n: int) -> tuple[list[int], list[np.ndarray]]:
    tokens, logits = [], []
    with torch.no_grad():
        out, *cache = model(torch.tensor([prompt]))
        last = out[0, -1]
        for _ in range(n):
            tokens.append(int(last.argmax()))
            logits.append(last.numpy())
            out, *cache = model(torch.tensor([[tokens[-1]]]), *cache)
            last = out[0, -1]
    return tokens, logits


def test_greedy_generation_matches_pytorch_for_32_tokens(tiny_decoder, ncnn_decoder):
    prompt = [5, 9, 3, 17, 2]
    want_tokens, want_logits = torch_greedy(tiny_decoder, prompt, 32)
    assert len(set(want_tokens)) > 8, "the test model should not repeat one token"
    got = greedy(ncnn_decoder, prompt, 32)
    assert got.tokens == want_tokens
    errors = [rel_error(g, w) for g, w in zip(got.logits, want_logits)]
    assert len(errors) == 32 and max(errors) <= TOL, errors


def test_generation_past_max_length_is_refused(ncnn_decoder):
    with pytest.raises(ValueError, match="exceed the programs' max_length 64"):
        greedy(ncnn_decoder, [1, 2, 3], 62)


def test_a_cache_with_the_new_entries_first_is_refused(tmp_path):
    torch.manual_seed(0)
    pt2 = export_decoder(TinyDecoder(new_first=True), tmp_path / "nf.pt2", max_length=16)
    with pytest.raises(CacheLayoutError, match=r"program 'decode': unsupported cache layout at node cat_\d+ "
                                               r"\(aten.cat.default\): cache input past_0 must come first"):
        convert_decoder(pt2, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nf.pt2"]


def test_a_cache_with_another_sequence_axis_is_refused_at_export(tmp_path):
    class SeqSecond(TinyDecoder):
        def forward(self, input_ids, *past):
            logits, *cache = super().forward(input_ids, *(p.transpose(1, 2) for p in past))
            return (logits, *(c.transpose(1, 2) for c in cache))

    with pytest.raises(ValueError, match=r"cache output 0 has shape \(1, 8, 2, 8\); expected \(1, kv_heads, 8, "):
        export_decoder(SeqSecond(), tmp_path / "s.pt2")
