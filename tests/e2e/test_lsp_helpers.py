"""The pytest-lsp helpers' own checks (plain functions: no event loop, no server)."""
from lsp_helpers import closes_an_open_paren


def test_closes_an_open_paren():
    assert closes_an_open_paren("values)") and closes_an_open_paren(")")
    assert not closes_an_open_paren("()") and not closes_an_open_paren("values") and not closes_an_open_paren("f(x)")
