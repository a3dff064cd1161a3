"""End-to-end with the shipped model: real code completions through the real server. Skipped
until engine/default_model/ holds a trained checkpoint."""
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import CONFIG, closes_an_open_paren, inline, open_doc, start

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOURCE = '''import json


def load_config(path):
    """Read a JSON config file and return it as a dict."""
    with open(path) as fh:
        
    return config


def mean(values):
    """Arithmetic mean of a non-empty list of numbers."""
    return sum(values) / len()
'''
BODY = types.Position(6, 8)                    # the empty line inside `with open(path) as fh:`
CALL = types.Position(12, len("    return sum(values) / len("))     # before the ")"


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, shipped_model):
    await start(lsp_client, shipped_model, debounceMs=0)
    open_doc(lsp_client, "file:///shipped/config.py", SOURCE)
    yield
    await lsp_client.shutdown_session()


async def test_completion_inside_a_function_body(client: LanguageClient):
    result = await inline(client, "file:///shipped/config.py", BODY)
    assert result.items, "the shipped model proposed nothing inside a function body"
    for item in result.items:
        assert item.range == types.Range(BODY, BODY)
        assert item.insert_text.strip() and not item.insert_text.startswith(" ")   # indentation already typed
    print("\n".join(repr(i.insert_text) for i in result.items), file=sys.stderr)


async def test_automatic_trigger_mid_line_gives_one_single_line_candidate(client: LanguageClient):
    result = await inline(client, "file:///shipped/config.py", CALL, invoked=False)
    assert len(result.items) == 1, f"expected one candidate for len(|), got {[i.insert_text for i in result.items]}"
    for item in result.items:
        assert "\n" not in item.insert_text and item.range == types.Range(CALL, CALL)
        assert not closes_an_open_paren(item.insert_text)   # the suffix already closes len(
