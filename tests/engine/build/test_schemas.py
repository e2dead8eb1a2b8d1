"""The shipped ATen schema table: content, enum defaults, mutability, and that it is exactly
what tools/gen_aten_schemas.py produces from the pinned torch."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.build import schemas

ROOT = Path(__file__).resolve().parents[3]


def test_conv2d_arguments_types_and_defaults():
    s = schemas.get("aten.conv2d.default")
    assert [a.name for a in s.arguments] == ["input", "weight", "bias", "stride", "padding", "dilation", "groups"]
    assert [a.type for a in s.arguments] == ["Tensor", "Tensor", "Tensor?", "SymInt[2]", "SymInt[2]", "SymInt[2]",
                                            "SymInt"]
    assert [a.has_default for a in s.arguments] == [False, False, True, True, True, True, True]
    assert [a.default for a in s.arguments[2:]] == [None, [1, 1], [0, 0], [1, 1], 1]
    assert s.arguments[2].is_tensor and s.arguments[2].is_optional and not s.arguments[3].is_tensor
    assert s.argument("groups").default == 1 and s.argument("nope") is None
    assert [r.type for r in s.returns] == ["Tensor"] and not s.is_mutable and not s.is_inplace


def test_enum_string_and_float_defaults():
    assert schemas.get("aten.contiguous.default").argument("memory_format").default == "contiguous_format"
    assert schemas.get("aten.randint.default").argument("dtype").default == "int64"
    assert schemas.get("aten.mse_loss.default").argument("reduction").default == 1  # `int reduction=Mean`
    assert schemas.get("aten.gelu.default").argument("approximate").default == "none"
    eps = schemas.get("aten.layer_norm.default").argument("eps")
    assert eps.type == "float" and eps.default == 1e-05
    alpha = schemas.get("aten.add.Tensor").argument("alpha")
    assert alpha.kwarg_only and alpha.type == "Scalar" and alpha.default == 1
    assert schemas.get("aten.empty.memory_format").argument("layout").type == "Layout?"


def test_mutation_and_alias_information():
    relu_ = schemas.get("aten.relu_.default")
    assert relu_.is_mutable and relu_.is_inplace and relu_.arguments[0].alias == "a!"
    assert [(a.name, r) for a, r in relu_.written_arguments()] == [("self", 0)]
    out = schemas.get("aten.add.out")
    assert out.is_out and out.is_mutable and not out.is_inplace and out.argument("out").is_out
    view = schemas.get("aten.view.default")
    assert view.returns[0].alias == "a" and not view.is_mutable
    bn = schemas.get("aten._native_batch_norm_legit_no_training.default")
    assert len(bn.returns) == 3
    assert [r.name for r in schemas.get("aten.max.dim").returns] == ["values", "indices"]
    assert schemas.get("aten.split_with_sizes.default").returns[0].type == "Tensor[]"
    assert schemas.get("aten.index.Tensor").argument("indices").type == "Tensor?[]"


def test_other_namespaces_and_unknown_keys():
    assert schemas.get("prims.convert_element_type.default") is not None
    assert schemas.get("quantized_decomposed.quantize_per_tensor.default") is not None
    assert schemas.get("aten.sym_size.int").returns[0].type == "SymInt"
    assert schemas.get("_operator.mul") is None
    assert schemas.get("higher_order.cond") is None
    assert schemas.get("aten.conv2d") is None  # keys always name an overload
    assert len(schemas.keys()) > 4000
    assert schemas.torch_version() == "2.13.0"


def test_every_line_of_the_table_is_found_and_nothing_else():
    """``get`` binary-searches the file's text: every key finds its own line's JSON (read here
    by splitting the whole file, independently), and near misses of each find nothing."""
    import gzip
    import json

    head, *lines = gzip.decompress(schemas.TABLE_PATH.read_bytes()).decode().splitlines()
    table = dict(line.split("\t", 1) for line in lines)
    assert schemas.keys() == list(table)
    for key, text in table.items():
        s = schemas.get(key)
        assert s is not None and s.key == key
        assert [a.name for a in s.arguments] == [a["name"] for a in json.loads(text)["args"]]
        for miss in (key[:-1], key + "x", key + ".default", " " + key):
            assert miss in table or schemas.get(miss) is None
    assert json.loads(head)["torch_version"] == schemas.torch_version()
    for miss in ("", "\t", "a", "zzz", "aaa.b.c", "~"):
        assert schemas.get(miss) is None


@pytest.mark.torch
def test_committed_table_is_what_the_generator_writes(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "table.jsonl.gz"
    subprocess.run([sys.executable, str(ROOT / "tools" / "gen_aten_schemas.py"), "-o", str(out)], check=True,
                   cwd=ROOT, capture_output=True)
    assert out.read_bytes() == schemas.TABLE_PATH.read_bytes()
