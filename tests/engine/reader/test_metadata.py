"""Unit tests of engine.reader.metadata: node metadata strings."""
from __future__ import annotations

import pytest

from engine.reader.metadata import (MetadataError, MetadataParser, normalize_module_path, parse_module_stack,
                                    parse_source, parse_stack_trace, split_outside_brackets)
from engine.reader.schema import ModuleFrame, SourceLocation

TRACE = ('File "/work/app/model.py", line 42, in forward\n    x = self.conv(x)\n'
         '  File "/venv/torch/nn/modules/conv.py", line 565, in forward\n    return self._conv_forward(x)')


def test_split_outside_brackets():
    assert split_outside_brackets("a,b,c") == ["a", "b", "c"]
    assert split_outside_brackets("k,L['self'].layers[0,1],T") == ["k", "L['self'].layers[0,1]", "T"]
    assert split_outside_brackets("k,f(a, b),T") == ["k", "f(a, b)", "T"]


def test_module_stack_with_brackets_and_old_paths():
    text = ("L__self__,,m.Net;L__self___layers_0,L['self'].layers[0],torch.nn.Sequential;"
            "x,blocks.dict['a, b'],T;_empty_nn_module_stack_from_metadata_hook,"
            "_empty_nn_module_stack_from_metadata_hook,_empty_nn_module_stack_from_metadata_hook")
    frames = parse_module_stack(text)
    assert frames == [ModuleFrame("L__self__", "", "m.Net"),
                      ModuleFrame("L__self___layers_0", "layers.0", "torch.nn.Sequential"),
                      ModuleFrame("x", "blocks.dict['a, b']", "T")]
    assert normalize_module_path("L['self'].encoder['blk'].fc") == "encoder.blk.fc"
    assert normalize_module_path("layer1.0.conv1") == "layer1.0.conv1"
    with pytest.raises(MetadataError, match="not 'key,path,type'"):
        parse_module_stack("only,two")


def test_source_location_is_the_first_frame():
    assert parse_source(TRACE) == SourceLocation("/work/app/model.py", 42, "forward", "x = self.conv(x)")
    assert str(parse_source(TRACE)) == "/work/app/model.py:42"
    assert parse_source("no frames here") is None


def test_stack_trace_lists_every_frame_outermost_first():
    frames = parse_stack_trace(TRACE)
    assert [str(f) for f in frames] == ["/work/app/model.py:42", "/venv/torch/nn/modules/conv.py:565"]
    assert frames[1].function == "forward" and frames[1].code == "return self._conv_forward(x)"
    assert frames[0] == parse_source(TRACE)
    assert parse_stack_trace("no frames here") == []


def test_parser_fills_every_field_and_reuses_parsed_strings():
    p = MetadataParser()
    raw = {"stack_trace": TRACE, "nn_module_stack": "L__self__,,m.Net;c,conv,torch.nn.Conv2d",
           "source_fn_stack": "conv2d,torch.nn.modules.conv.Conv2d;relu,torch.relu",
           "torch_fn": "conv2d_1;builtin_function_or_method.conv2d", "custom": '{"a": 1}', "other": "kept"}
    md = p.parse(raw)
    assert md.module_path == "conv" and md.module_type == "torch.nn.Conv2d"
    assert md.source.line == 42 and md.stack_trace == TRACE
    assert md.source_fn_stack == [("conv2d", "torch.nn.modules.conv.Conv2d"), ("relu", "torch.relu")]
    assert md.torch_fn == ("conv2d_1", "builtin_function_or_method.conv2d")
    assert md.raw["other"] == "kept"
    assert p.parse(dict(raw)).module_stack is md.module_stack
    empty = p.parse({})
    assert empty.module_path == "" and empty.source is None and empty.module_stack == []


@pytest.mark.parametrize("raw, key", [({"torch_fn": "no-delimiter"}, "torch_fn"),
                                      ({"source_fn_stack": "nocomma"}, "source_fn_stack"),
                                      ({"nn_module_stack": 5}, "nn_module_stack")])
def test_malformed_metadata(raw, key):
    with pytest.raises(MetadataError) as e:
        MetadataParser().parse(raw)
    assert e.value.key == key
