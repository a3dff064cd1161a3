"""End-to-end: a cursor at column 0 of a line with code (line-level infilling: the middle is whole
lines above that line). The inline item and the completion fallback both carry the line break that
moves the cursor's line below the inserted one, so the document reads prefix + completion + suffix;
CRLF documents get their own line ending."""
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import CONFIG, inline, open_doc, popup, start

pytestmark = pytest.mark.asyncio(loop_scope="module")

SOURCE = '''def mean(values):
    """The arithmetic mean of a non-empty list."""
    total = 0
    for value in values:
        total += value
    return total / len(values)
'''
CURSOR = types.Position(5, 0)            # column 0 of `    return total / len(values)`
OFFSET = len("".join(SOURCE.splitlines(keepends=True)[:CURSOR.line]))


def whole_line(text: str) -> bool:
    """One or more whole non-blank lines ending with a line break."""
    return text.endswith("\n") and bool(text.strip()) and bool(text.splitlines()[0].strip())


@pytest.fixture(scope="module")
def line_model(model_that_says):
    return model_that_says(SOURCE[:OFFSET], SOURCE[OFFSET:], whole_line, dtype="fp32")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, line_model):
    lsp_client.init_result = await start(lsp_client, line_model, completionFallback=True, snippetFiles=0)
    yield
    await lsp_client.shutdown_session()


async def test_inline_item_inserts_whole_lines_above_the_cursor_line(client: LanguageClient):
    uri = "file:///e2e/line_start.py"
    open_doc(client, uri, SOURCE)
    result = await inline(client, uri, CURSOR)
    assert result.items, "no suggestion at column 0"
    text = result.items[0].insert_text
    assert result.items[0].range == types.Range(CURSOR, CURSOR)
    assert whole_line(text), repr(text)
    edited = SOURCE[:OFFSET] + text + SOURCE[OFFSET:]
    # the cursor's line is intact, on its own line below what was inserted
    assert edited.splitlines()[CURSOR.line + text.count("\n")] == "    return total / len(values)"


async def test_crlf_document_gets_crlf_line_breaks(client: LanguageClient):
    uri = "file:///e2e/line_start_crlf.py"
    open_doc(client, uri, SOURCE.replace("\n", "\r\n"))
    result = await inline(client, uri, CURSOR)
    assert result.items, "no suggestion at column 0 of the CRLF document"
    text = result.items[0].insert_text
    assert text.endswith("\r\n") and "\n" not in text.replace("\r\n", ""), repr(text)


async def test_completion_fallback_item_keeps_the_line_break(client: LanguageClient):
    uri = "file:///e2e/line_start_popup.py"
    open_doc(client, uri, SOURCE)
    result = await popup(client, uri, CURSOR)
    assert result.items, "no fallback item at column 0"
    for item in result.items:
        new_text = item.text_edit.new_text
        assert new_text.endswith("\n") and new_text.count("\n") == 1 and new_text.strip(), repr(new_text)
