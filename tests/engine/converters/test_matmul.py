"""Products of computed tensors end to end (both dialects): matmul / mm / bmm / baddbmm / addmm /
einsum → ncnn MatMul (transB=1 for a transposed right operand), coexisting with the linear
family's constant-weight matmul."""
import pytest
import torch

from tests.engine.converters.modules import Fn
from tests.harness import DIALECTS, check_module


def _types(checked):
    return [op.type for op in checked.result.ncnn.ops]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("shape_a,shape_b", [
    ((1, 5, 6), (1, 6, 7)),
    ((1, 3, 5, 6), (1, 3, 6, 4)),
    ((1, 3, 5, 6), (1, 1, 6, 4)),
    ((1, 5, 6), (1, 2, 6, 4)),
    ((1, 2, 3, 5, 6), (1, 2, 3, 6, 4)),
], ids=["3d", "4d", "4d_bcast", "3d_4d", "5d"])
def test_matmul_inputs(tmp_path, dialect, shape_a, shape_b):
    c = check_module(Fn(lambda a, b: a @ b), [torch.randn(shape_a), torch.randn(shape_b)], tmp_path,
                     dialect=dialect, expect_types=["MatMul"])
    assert "Permute" not in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_matmul_transposed_right(tmp_path, dialect):
    """q @ k.transpose(-2, -1): the transpose becomes MatMul's transB."""
    c = check_module(Fn(lambda q, k: q @ k.transpose(-2, -1)), [torch.randn(1, 2, 5, 8), torch.randn(1, 2, 6, 8)],
                     tmp_path, dialect=dialect, expect_types=["MatMul"])
    assert "Permute" not in _types(c)
    mm = next(op for op in c.result.ncnn.ops if op.type == "MatMul")
    assert mm.params.get(0) == 1


@pytest.mark.parametrize("dialect", DIALECTS)
def test_matmul_computed_2d_right(tmp_path, dialect):
    """A computed 2-D right operand is a MatMul, not a linear layer."""
    check_module(Fn(lambda a, b: a @ (b * 2)), [torch.randn(1, 4, 6), torch.randn(6, 3)], tmp_path, dialect=dialect,
                 batched=[True, False], expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_matmul_with_constant_weight_still_linear(tmp_path, dialect):
    w = torch.randn(6, 3)
    c = check_module(Fn(lambda a: a @ w), [torch.randn(1, 4, 6)], tmp_path, dialect=dialect)
    assert "MatMul" not in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_matmul_vector(tmp_path, dialect):
    """(core ATen spells a matrix-vector product as mul + sum)"""
    check_module(Fn(lambda a, v: a @ v), [torch.randn(1, 4, 6), torch.randn(6)], tmp_path, dialect=dialect,
                 batched=[True, False], expect_types=["MatMul"] if dialect == "training" else [])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_bmm(tmp_path, dialect):
    check_module(Fn(lambda a, b: torch.bmm(a, b)), [torch.randn(1, 5, 6), torch.randn(1, 6, 7)], tmp_path,
                 dialect=dialect, expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_mm_unbatched(tmp_path, dialect):
    """2-D operands (the batch axis squeezed away) → a 2-D MatMul."""
    check_module(Fn(lambda a, b: torch.mm(a.squeeze(0), b.squeeze(0)).unsqueeze(0)),
                 [torch.randn(1, 5, 6), torch.randn(1, 6, 7)], tmp_path, dialect=dialect, expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2.0), (0, 1.5)])
def test_baddbmm(tmp_path, dialect, beta, alpha):
    bias = torch.randn(1, 5, 7)
    check_module(Fn(lambda a, b: torch.baddbmm(bias, a, b, beta=beta, alpha=alpha)),
                 [torch.randn(1, 5, 6), torch.randn(1, 6, 7)], tmp_path, dialect=dialect, expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_baddbmm_input_bias(tmp_path, dialect):
    check_module(Fn(lambda s, a, b: torch.baddbmm(s, a, b, alpha=0.5)),
                 [torch.randn(1, 5, 7), torch.randn(1, 5, 6), torch.randn(1, 6, 7)], tmp_path, dialect=dialect,
                 expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_addmm_computed(tmp_path, dialect):
    check_module(Fn(lambda s, a, b: torch.addmm(s.squeeze(0), a.squeeze(0), b.squeeze(0), beta=2.0).unsqueeze(0)),
                 [torch.randn(1, 5, 7), torch.randn(1, 5, 6), torch.randn(1, 6, 7)], tmp_path, dialect=dialect,
                 expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("equation,shapes", [
    ("bij,bjk->bik", [(1, 5, 6), (1, 6, 7)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 6, 8)]),
    ("bhqk,bhkd->bhqd", [(1, 2, 5, 6), (1, 2, 6, 8)]),
    ("bqhd,bkhd->bhqk", [(1, 5, 2, 8), (1, 6, 2, 8)]),
    ("bij,bkj->bik", [(1, 5, 6), (1, 7, 6)]),
    ("bchw,bcd->bdhw", [(1, 4, 3, 5), (1, 4, 6)]),
    ("bnd,bmd->bnm", [(1, 4, 8), (1, 5, 8)]),
], ids=["bmm", "qk", "av", "heads_mid", "transB", "grouped_free", "nd_md"])
def test_einsum_pair(tmp_path, dialect, equation, shapes):
    """core ATen decomposes einsum through 5-D unsqueeze/permute/view chains around bmm
    (legalize_tensor_rank brings them to <= 4-D)."""
    check_module(Fn(lambda a, b: torch.einsum(equation, a, b)), [torch.randn(s) for s in shapes], tmp_path,
                 dialect=dialect, expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_einsum_2d(tmp_path, dialect):
    check_module(Fn(lambda a, b: torch.einsum("ij,jk->ik", a.squeeze(0), b.squeeze(0)).unsqueeze(0)),
                 [torch.randn(1, 5, 6), torch.randn(1, 6, 7)], tmp_path, dialect=dialect, expect_types=["MatMul"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_einsum_permute(tmp_path, dialect):
    c = check_module(Fn(lambda a: torch.einsum("bchw->bhwc", a)), [torch.randn(1, 3, 4, 5)], tmp_path,
                     dialect=dialect)
    assert _types(c) == ["Input", "Permute"]


W = torch.randn(4, 5)

EINSUMS = {  # equation cases beyond a plain product of two operands
    "implicit_output": (lambda x: torch.einsum("bij,jk", x, W), [(1, 3, 4)]),
    "implicit_permute": (lambda x: torch.einsum("bji", x), [(1, 3, 4)]),
    "sum_one_index": (lambda a: torch.einsum("bij->bi", a), [(1, 4, 5)]),
    "sum_in_one_operand": (lambda a, b: torch.einsum("bij,bk->bik", a, b), [(1, 3, 4), (1, 5)]),
    "three_operands": (lambda a, b, c: torch.einsum("bij,bjk,bkl->bil", a, b, c), [(1, 3, 4), (1, 4, 5), (1, 5, 2)]),
    "bilinear": (lambda a, b, c: torch.einsum("bn,anm,bm->ba", a, b, c), [(1, 3), (1, 3, 4), (1, 4)]),
    "outer": (lambda a, b: torch.einsum("bi,bj->bij", a, b), [(1, 3), (1, 4)]),
    "ellipsis_transpose": (lambda x: torch.einsum("...ij->...ji", x), [(2, 3, 4, 5)]),
    "ellipsis_trailing": (lambda x: torch.einsum("abc...->cba...", x), [(2, 3, 4, 5)]),
    "ellipsis_broadcast": (lambda a, b: torch.einsum("...ij,jk", a, b), [(1, 3, 4), (4, 2)]),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(EINSUMS))
def test_einsum_equations(tmp_path, dialect, name):
    """Sums, several operands and implicit outputs are products of pairs (no Einsum layer)."""
    fn, shapes = EINSUMS[name]
    c = check_module(Fn(fn), [torch.randn(*s) for s in shapes], tmp_path, dialect=dialect)
    assert "Einsum" not in _types(c)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("equation,out_shape", [("bii->bi", (1, 4)), ("bii->b", (1,))])
def test_einsum_with_a_diagonal(tmp_path, dialect, equation, out_shape):
    """A diagonal (or a trace) is ncnn's Einsum layer in the TRAINING dialect; core ATen spells
    it as ``diagonal`` (ncnn Diag) and a sum."""
    c = check_module(Fn(lambda a: torch.einsum(equation, a)), [torch.randn(1, 4, 4)], tmp_path, dialect=dialect)
    assert ("Einsum" if dialect == "training" else "Diag") in _types(c)
    assert c.expected[0].shape == out_shape
