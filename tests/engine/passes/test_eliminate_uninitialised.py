"""Tensors written part by part into uninitialised memory (``new_empty``/``empty``/``empty_like``
then slice or index assignments, as DeepSeek-V3's attention builds its keys): converted to the
concatenation of the parts, in both dialects, checked in ncnn against PyTorch; a tensor left
partly unwritten stays unconverted with the ``empty`` named."""
import pytest
import torch

from engine.convert import ConvertOptions, convert
from tests.harness import DIALECTS, Fn, check_module, export_pt2


def keys_like_deepseek(x, rope):
    """``new_empty`` then two ``copy_`` into slices of the last dim, one from an ``expand``."""
    nope = x * 2
    rot = rope.expand(*nope.shape[:-1], -1)
    k = nope.new_empty(*nope.shape[:-1], nope.shape[-1] + rot.shape[-1])
    k[..., : nope.shape[-1]].copy_(nope)
    k[..., nope.shape[-1]:].copy_(rot)
    return k.transpose(1, 2) + 1


def rows_into_empty(x):
    """``torch.empty`` then one row per ``select`` assignment."""
    out = torch.empty(1, 3, x.shape[-1])
    out[:, 0] = x[:, 0] * 2
    out[:, 1] = x[:, 1] + 1
    out[:, 2] = x[:, 2] - x[:, 3]
    return out


def overlapping_writes(x):
    """The second write overwrites half of the first: the last write wins."""
    t = x.new_empty(1, 4, 12)
    t[..., :8] = x[..., :8] * 3
    t[..., 4:] = x[..., 4:] - 1
    return t


def halves_of_empty_like(x):
    t = torch.empty_like(x)
    t[:, :2] = x[:, :2] * 2
    t[:, 2:] = torch.relu(x[:, 2:])
    return t


CASES = {
    "keys_like_deepseek": (keys_like_deepseek, [(1, 4, 6, 8), (1, 1, 6, 4)]),
    "rows_into_empty": (rows_into_empty, [(1, 4, 5)]),
    "overlapping_writes": (overlapping_writes, [(1, 4, 12)]),
    "halves_of_empty_like": (halves_of_empty_like, [(1, 5, 6, 7)]),
}


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("length", [3, 11])
def test_keys_assembled_in_empty_memory_at_a_run_time_length(tmp_path, dialect, length):
    """DeepSeek-V3's keys with the sequence length dynamic: the writes go along the static last
    dim, so the parts join there whatever the length."""
    seq = torch.export.Dim("seq", min=2, max=32)
    check_module(Fn(keys_like_deepseek), [torch.randn(1, 4, 6, 8), torch.randn(1, 1, 6, 4)], tmp_path,
                 dialect=dialect, dynamic_shapes=(({2: seq}, {2: seq}),),
                 run_inputs=[torch.randn(1, 4, length, 8), torch.randn(1, 1, length, 4)])


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("name", list(CASES))
def test_tensor_assembled_in_empty_memory(tmp_path, dialect, name):
    fn, shapes = CASES[name]
    # core ATen writes rows through masks (where(arange == i, row, out)): no concatenation there
    concat = dialect == "training" or name != "rows_into_empty"
    check_module(Fn(fn), [torch.randn(*s) for s in shapes], tmp_path, dialect=dialect,
                 expect_types=["Concat"] if concat else None)


def slices_leave_a_gap(x):
    t = x.new_empty(1, 4, 12)
    t[..., :8] = x * 2
    return t + 1


def rows_leave_a_gap(x):
    out = torch.empty(1, 3, x.shape[-1])
    out[:, 0] = x[:, 0] * 2
    out[:, 2] = x[:, 2] - x[:, 3]
    return out


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("fn,shape", [(slices_leave_a_gap, (1, 4, 8)), (rows_leave_a_gap, (1, 4, 5))])
def test_a_partly_unwritten_tensor_stays_unconverted(tmp_path, dialect, fn, shape):
    pt2 = export_pt2(Fn(fn), [torch.randn(*shape)], tmp_path / "m.pt2", dialect=dialect)
    result = convert(str(pt2), ConvertOptions(lint=True))
    assert not result.ok
    training = "aten.new_empty.default" if fn is slices_leave_a_gap else "aten.empty.memory_format"
    assert [d.op for d in result.errors] == [training if dialect == "training" else "aten.empty.memory_format"], \
        result.errors


def test_the_pass_records_what_it_replaced(tmp_path):
    pt2 = export_pt2(Fn(keys_like_deepseek), [torch.randn(1, 4, 6, 8), torch.randn(1, 1, 6, 4)], tmp_path / "m.pt2")
    result = convert(str(pt2), ConvertOptions(lint=True))
    record = next(r for r in result.records if r.name == "eliminate_uninitialised")
    text = record.snapshot
    assert "aten.new_empty" not in text and "aten.copy" not in text and "aten.slice_scatter" not in text
    cat = [line for line in text.splitlines() if line.startswith("aten.cat.default")]
    assert len(cat) == 1 and "dim=3" in cat[0], cat
