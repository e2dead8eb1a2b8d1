"""Slice assignment and copies (``x[:, 1:3] = y``, ``x[..., 1] = ...``, in-place ops on a slice,
``copy_`` into a slice, nested slices) and ``slice_scatter``, both dialects."""
import pytest
import torch

from tests.harness import DIALECTS, Fn, check_module


def assign_tensor(x, y):
    x = x.clone()
    x[:, 1:3] = y
    return x


def assign_select(x):
    x = x.clone()
    x[..., 1] = x[..., -1] * 3
    return x


def assign_nested(x):
    x = x.clone()
    x[:, :, 1:5, 2:6] = x[:, :, 1:5, 7:11] * 2
    return x


def add_inplace(x):
    x = x.clone()
    x[:, 1:2] += 1
    return x


def clamp_inplace(x):
    x = x.clone()
    x[:, :, 3, :2].clamp_(0, 0.5)
    return x


def through_select(x):
    x = x.clone()
    row = x[0]
    row[1:3] -= 2
    return x


def copy_into(x, y):
    x = x.clone()
    x[:, 2:5].copy_(y)
    return x


def whole(x):
    x = x.clone()
    x[:, :, :, :] = x[:, :, :, :] / 2
    return x


CASES = {
    "assign_tensor": (assign_tensor, [(1, 5, 6), (1, 2, 6)]),
    "assign_select": (assign_select, [(1, 3, 5, 6)]),
    "assign_nested": (assign_nested, [(1, 3, 6, 12)]),
    "add_inplace": (add_inplace, [(1, 3, 6)]),
    "clamp_inplace": (clamp_inplace, [(1, 3, 6, 12)]),
    "through_select": (through_select, [(1, 4, 6)]),
    "copy_into": (copy_into, [(1, 6, 4), (1, 3, 4)]),
    "whole": (whole, [(1, 3, 6, 12)]),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_slice_copy(tmp_path, dialect, name):
    fn, shapes = CASES[name]
    check_module(Fn(fn), [torch.randn(*s) for s in shapes], tmp_path, dialect=dialect)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("dim,start,end", [(2, 4, 6), (1, 0, 1), (3, 2, 4), (-1, 1, None)])
def test_slice_scatter(tmp_path, dialect, dim, start, end):
    def fn(x):
        part = torch.narrow(x, dim, 0, (end or x.shape[dim]) - start) * 2
        return torch.slice_scatter(x, part, dim=dim, start=start, end=end)

    check_module(Fn(fn), [torch.randn(1, 3, 8, 5)], tmp_path, dialect=dialect)


def test_copy_of_integer_into_float_is_refused(tmp_path):
    from engine.convert import ConvertOptions, convert
    from tests.harness import export_pt2

    def fn(x, i):
        x = x.clone()
        x[:, 1:3].copy_(i)
        return x

    pt2 = export_pt2(Fn(fn), [torch.randn(1, 5, 4), torch.randint(0, 9, (1, 2, 4))], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions())
    assert any(d.op.startswith("aten.copy") and "float" in d.reason for d in result.errors), result.errors


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_write_through_a_view_taken_before_another_write(tmp_path, dialect):
    """``xx = x[1]`` taken first, then ``x[..., 1] = ...``, then ``xx[2:4] += 1``: the view sees
    the first write and the base sees the second, as PyTorch's aliasing views do."""
    def fn(x):
        x = x.clone()
        xx = x[1]
        x[..., 1] = x[..., -1] * 3
        xx[2:4, ...] += 1
        x[:, :, 3, :2].clamp_(0, 0.5)
        return x

    check_module(Fn(fn), [torch.rand(3, 5, 6, 7)], tmp_path, dialect=dialect)
