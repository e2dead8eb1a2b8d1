"""Tokenising IR text lines (engine.ir.text.split_tokens): whitespace-separated tokens, double
quoted strings kept whole (with escapes), and the unquoted fast path agreeing with it."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.ir import IRError
from engine.ir.text import split_tokens


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
