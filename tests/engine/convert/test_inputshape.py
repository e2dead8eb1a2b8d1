"""User input shapes (``--inputshape``): parsed, checked against the model's inputs and the
exported ranges of its dynamic dims, and recorded for the passes."""
import pytest

from engine.convert import ConvertOptions, convert
from engine.convert.inputshape import InputShapeError, parse_inputshape

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def dynamic_batch(tmp_path_factory):
    """A linear layer exported with a dynamic batch dim in [2, 16]."""
    batch = torch.export.Dim("batch", min=2, max=16)
    ep = torch.export.export(torch.nn.Linear(4, 3).eval(), (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
    path = tmp_path_factory.mktemp("inputshape") / "dyn.pt2"
    torch.export.save(ep, str(path))
    return path


def test_parse():
    assert parse_inputshape("[1,3,224,224],[1, 10]") == [[1, 3, 224, 224], [1, 10]]
    with pytest.raises(InputShapeError, match="expected e.g."):
        parse_inputshape("1,3")
    with pytest.raises(InputShapeError, match="integers"):
        parse_inputshape("[1,x]")


def test_binds_the_dynamic_dim_within_its_range(dynamic_batch):
    result = convert(dynamic_batch, ConvertOptions(input_shapes=[[8, 4]], snapshots=False))
    assert result.ok
    assert list(result.aten.meta["symbol_values"].values()) == [8]


@pytest.mark.parametrize("shape,reason", [([100, 4], r"outside its exported range \[2, 16\]"),
                                          ([1, 4], r"outside its exported range \[2, 16\]"),
                                          ([8, 5], "dim 4 is static, got 5"),
                                          ([8, 4, 1], "rank 3")])
def test_refuses_what_the_model_cannot_take(dynamic_batch, shape, reason):
    with pytest.raises(InputShapeError, match=reason):
        convert(dynamic_batch, ConvertOptions(input_shapes=[shape], snapshots=False))
