"""Weights stored as bfloat16 (an LLM saved in bf16, a bf16 buffer): numpy has no bfloat16,
so the file's payload is raw 16-bit words; the IR must hold their values. They were read as
the integers those bits spell (a Linear's weights in the tens of thousands): the model
converted without a word and computed garbage. In ncnn against PyTorch (which computes with
the same bf16 values in float32 here), both dialects; and the .pnnx.bin keeps the bf16 bits."""
import zipfile

import numpy as np
import pytest
import torch

from tests.harness import DIALECTS, check_module


class Bf16Weights(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8).to(torch.bfloat16)
        self.conv = torch.nn.Conv1d(8, 6, 3, padding=1).to(torch.bfloat16)
        self.fc = torch.nn.Linear(6, 4).to(torch.bfloat16)
        self.register_buffer("normalizer", torch.tensor(6 ** 0.5, dtype=torch.bfloat16))  # RecurrentGemma's

    def forward(self, ids, x):
        h = self.emb.weight.float()[ids] * self.normalizer.float()  # (1, T, 8)
        h = torch.nn.functional.conv1d((h + x).transpose(1, 2), self.conv.weight.float(), self.conv.bias.float())
        return torch.nn.functional.linear(torch.relu(h).transpose(1, 2), self.fc.weight.float(), self.fc.bias.float())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bf16_weights_hold_their_values(tmp_path, dialect):
    torch.manual_seed(0)
    check_module(Bf16Weights(), [torch.randint(0, 16, (1, 5)), torch.randn(1, 5, 8)], tmp_path, dialect=dialect)


class Bf16Linear(torch.nn.Module):
    """A layer that computes in bfloat16 (PyTorch rounds x and the result to bf16; ncnn computes
    in float32 with the same weights): the .pnnx.bin holds the weight's bf16 bits."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8).to(torch.bfloat16)

    def forward(self, x):
        return self.fc(x.to(torch.bfloat16)).float()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_bf16_layer_keeps_its_bits_in_the_pnnx_model(tmp_path, dialect):
    torch.manual_seed(0)
    m = Bf16Linear()
    c = check_module(m, [torch.randn(1, 16)], tmp_path, dialect=dialect, tol=2e-2)  # PyTorch's bf16 rounding
    assert c.errors[0] > 0  # PyTorch did round in bf16: ncnn is compared with a lossy reference
    weights = [(op, k) for op in c.result.pnnx.ops for k, a in op.attrs.items() if a.dtype == "bf16"]
    assert weights, [(op.type, {k: a.dtype for k, a in op.attrs.items()}) for op in c.result.pnnx.ops]
    want = m.fc.weight.detach().contiguous().view(torch.int16).numpy().view(np.uint16).reshape(-1)
    with zipfile.ZipFile(tmp_path / f"model_{dialect}.pnnx.bin") as z:
        stored = [np.frombuffer(z.read(f"{op.name}.{k}"), "<u2") for op, k in weights]
    assert any(np.array_equal(bits, want) for bits in stored)
    # and read back as the values they are
    from engine.writers.pnnx_reader import read_pnnx

    back = read_pnnx(tmp_path / f"model_{dialect}.pnnx.param", tmp_path / f"model_{dialect}.pnnx.bin")
    values = [a.data for op in back.ops for a in op.attrs.values() if a.dtype == "bf16"]
    assert any(np.array_equal(v.reshape(-1), m.fc.weight.detach().float().numpy().reshape(-1)) for v in values)
