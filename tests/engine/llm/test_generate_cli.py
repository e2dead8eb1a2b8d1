"""``pt2ncnn generate``: the tokens PyTorch's greedy decoding picks, and clear refusals."""
from __future__ import annotations

import json

import torch

from engine.cli.main import main
from tests.engine.llm.test_generate import torch_greedy


def test_generate_prints_pytorchs_greedy_tokens(tiny_decoder, tiny_package, tmp_path, capsys):
    code = main(["generate", str(tiny_package), "--prompt-ids", "5,9,3,17,2", "--max-new-tokens", "32",
                 "-o", str(tmp_path), "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    report = json.loads(out.out)
    assert report["tokens"] == torch_greedy(tiny_decoder, [5, 9, 3, 17, 2], 32)[0]
    assert report["decode_tokens_per_second"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tiny.decode.ncnn.bin", "tiny.decode.ncnn.param", "tiny.prefill.ncnn.bin", "tiny.prefill.ncnn.param"]


def test_generate_refuses_a_package_without_a_decoder(tmp_path, capsys):
    path = tmp_path / "relu.pt2"
    torch.export.save(torch.export.export(torch.nn.ReLU(), (torch.randn(2),)), str(path))
    assert main(["generate", str(path), "--prompt-ids", "1,2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: not a decoder package") and "Traceback" not in err


def test_generate_refuses_token_ids_outside_the_vocabulary(tiny_package, capsys):
    assert main(["generate", str(tiny_package), "--prompt-ids", "1,64"]) == 2
    assert "below the vocabulary size 64" in capsys.readouterr().err
