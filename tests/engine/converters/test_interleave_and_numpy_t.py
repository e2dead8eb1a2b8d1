"""``repeat_interleave`` with an int count (GPT-J/Cohere/CodeGen rotary tables), ``x.T``
(``aten.numpy_T``: Falcon's linear weights), and factories whose result nobody reads (dead in
the training dialect: DeBERTa's unused ``token_type_ids``, WavLM's empty ``in_proj_weight``),
both dialects, in ncnn against PyTorch."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module


class RotaryTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("freq", torch.linspace(0.1, 1.0, 3))

    def forward(self, x):
        return x * self.freq.repeat_interleave(2)  # a constant: folded


class LinearWithT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(5, 6))

    def forward(self, x):
        return x @ self.weight.T  # a constant: folded


def dead_factories(x):
    unused = torch.zeros(x.shape, dtype=torch.long)  # noqa: F841
    unused2 = torch.empty([0])  # noqa: F841
    return x * 2.0


CASES = {
    "interleave_last_dim": (Fn(lambda x: torch.repeat_interleave(x.sin(), 2, dim=-1) * 2.0), [(1, 4, 6)]),
    "interleave_channels": (Fn(lambda x: x.repeat_interleave(3, dim=1) + 1), [(1, 3, 5, 4)]),
    "interleave_constant": (RotaryTable(), [(1, 4, 6)]),
    "numpy_t_activation": (Fn(lambda x: (x * 2).T + 1), [(4, 6)]),
    "numpy_t_weight": (LinearWithT(), [(1, 4, 6)]),
    "dead_factories": (Fn(dead_factories), [(1, 12)]),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_case(tmp_path, dialect, name):
    module, shapes = CASES[name]
    torch.manual_seed(0)
    check_module(module, [torch.randn(*s) for s in shapes], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [5, 9])
def test_interleave_beside_a_dynamic_length(tmp_path, dialect, length):
    """GPT-J's rotary table: interleaved along the (static) head dim, the sequence length dynamic."""
    n = torch.export.Dim("n", min=2, max=32)
    check_module(Fn(lambda x: torch.repeat_interleave(x.sin(), 2, dim=-1) * 2.0), [torch.randn(1, 7, 6)], tmp_path,
                 dialect=dialect, dynamic_shapes=(({1: n},),), run_inputs=[torch.randn(1, length, 6)])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [5, 9])
def test_interleave_along_the_dynamic_length(tmp_path, dialect, length):
    """Mixtral's expert dispatch: each token's row repeated top-k times along the run-time token dim."""
    n = torch.export.Dim("n", min=2, max=32)
    check_module(Fn(lambda x: torch.repeat_interleave(x[0] * 3.0, 2, dim=0) + 1.0), [torch.randn(1, 7, 6)],
                 tmp_path, dialect=dialect, dynamic_shapes=(({1: n},),), run_inputs=[torch.randn(1, length, 6)])


class RotateEveryTwo(torch.nn.Module):
    """GPT-J's rotate_every_two: strided slices of the head dim, the sequence length dynamic."""

    def forward(self, x):
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2) + torch.repeat_interleave(x1.cos(), 2, dim=-1)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [5, 9])
def test_strided_head_dim_beside_a_dynamic_length(tmp_path, dialect, length):
    n = torch.export.Dim("n", min=2, max=32)
    check_module(RotateEveryTwo(), [torch.randn(1, 7, 4, 8)], tmp_path, dialect=dialect,
                 dynamic_shapes=({1: n},), run_inputs=[torch.randn(1, length, 4, 8)])
