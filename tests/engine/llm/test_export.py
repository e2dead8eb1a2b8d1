"""The export helper: prefill and decode programs of one decoder in one ``.pt2``."""
from __future__ import annotations

import pytest
import torch

import engine
from engine.llm import export_decoder, read_manifest
from tests.engine.llm.conftest import MAX_LENGTH


def test_package_holds_both_programs_and_the_manifest(tiny_package):
    with engine.load(tiny_package) as pkg:
        assert pkg.model_names == ["decode", "prefill"]
        m = read_manifest(pkg)
        assert (m.prefill, m.decode, m.cache_tensors, m.max_length, m.vocab_size) == \
            ("prefill", "decode", 4, MAX_LENGTH, 64)
        prefill, decode = pkg.models["prefill"], pkg.models["decode"]
        assert [i.name for i in prefill.signature.user_inputs] == ["input_ids"]
        assert len(decode.signature.user_inputs) == 5 and len(decode.signature.user_outputs) == 5
        # the prompt length and the cache length are dynamic, bounded by max_length
        for ep in (prefill, decode):
            (rc,) = ep.range_constraints.values()
            assert (rc.min_val, rc.max_val) == (1, MAX_LENGTH - 1)


def test_a_model_without_a_cache_is_refused(tmp_path):
    class Plain(torch.nn.Module):
        def forward(self, ids):
            return ids.float()

    with pytest.raises(ValueError, match=r"must return \(logits, k0, v0"):
        export_decoder(Plain(), tmp_path / "x.pt2")
    assert not list(tmp_path.iterdir())


def test_a_package_without_a_manifest_is_refused(tmp_path):
    path = tmp_path / "m.pt2"
    ep = torch.export.export(torch.nn.ReLU(), (torch.randn(2),))
    torch.export.save(ep, str(path))
    with engine.load(path) as pkg, pytest.raises(engine.PT2FormatError, match="not a decoder package"):
        read_manifest(pkg)
