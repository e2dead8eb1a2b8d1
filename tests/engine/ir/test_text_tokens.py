"""Tokenising IR text lines (engine.ir.text.split_tokens): whitespace-separated tokens, double
quoted strings kept whole (with escapes), and the unquoted fast path agreeing with it; reading
values (parse_value): the scalar fast path agreeing with the tuple-aware parser."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.ir import IRError
from engine.ir.text import _ValueParser, parse_value, split_tokens


def test_unquoted_line_splits_on_any_whitespace_runs():
    assert split_tokens("  nn.Conv2d conv_0\t1 1  a b kernel_size=(3,3)\n") == [
        "nn.Conv2d", "conv_0", "1", "1", "a", "b", "kernel_size=(3,3)"]
    assert split_tokens("") == []
    assert split_tokens(" \t ") == []


def test_quoted_strings_keep_spaces_and_escaped_quotes():
    assert split_tokens('pnnx.Expression e 1 1 a b expr="add( @0, 1)" !from=x') == [
        "pnnx.Expression", "e", "1", "1", "a", "b", 'expr="add( @0, 1)"', "!from=x"]
    assert split_tokens(r'op n s="a \" b"  t') == ["op", "n", r's="a \" b"', "t"]


def test_unterminated_string_is_refused():
    with pytest.raises(IRError, match="unterminated string"):
        split_tokens('op n s="abc')


_token = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc"), blacklist_characters='"'),
                 min_size=1, max_size=8)
_space = st.sampled_from([" ", "  ", "\t", " \t "])


@given(st.lists(_token, max_size=12), st.lists(_space, min_size=13, max_size=13))
def test_tokens_joined_by_any_whitespace_come_back(tokens, spaces):
    line = spaces[0] + "".join(t + s for t, s in zip(tokens, spaces[1:]))
    assert split_tokens(line) == tokens


# ------------------------------------------------------------------ values (parse_value)
_SCALARS = ["None", "True", "False", "nan", "inf", "-inf", "0", "-7", "+3", "12345678901234567890", "1.5",
            "-0.25", ".5", "5.", "1e5", "2.5E-3", "-1e+2", "", "abc", "a.b", "layer1.0.conv", "x-1", "1e", "--1",
            "1_000", " 1"]


@pytest.mark.parametrize("tok", _SCALARS)
def test_a_scalar_parses_as_the_full_parser_reads_it(tok):
    """The scalar fast path of parse_value gives exactly what the tuple-aware parser gives."""
    full = _ValueParser(tok).parse()
    fast = parse_value(tok)
    assert type(fast) is type(full)
    assert repr(fast) == repr(full)  # nan == nan is False; the repr tells the same value


def test_scalar_kinds():
    assert parse_value("+3") == 3 and type(parse_value("+3")) is int
    assert parse_value("1_000") == "1_000"  # not Python's int("1_000")
    assert parse_value("5.") == 5.0 and type(parse_value("5.")) is float
    assert parse_value("1e") == "1e" and parse_value("") == ""


@pytest.mark.parametrize("text, value", [("(1,2)", [1, 2]), ("((1,a),())", [[1, "a"], []]),
                                         ('"a,b"', "a,b"), ('("x y",None)', ["x y", None])])
def test_tuples_and_quoted_strings_parse(text, value):
    assert parse_value(text) == value


@pytest.mark.parametrize("text", ["a,b", "a)", "(1,2", "(1,2)x"])
def test_malformed_values_are_refused(text):
    with pytest.raises(IRError):
        parse_value(text)
