"""End-to-end: position encodings. UTF-16 unless the client offers `general.positionEncodings`;
columns after an emoji must be counted in the negotiated unit, both in what the server reads
(edits, requests) and in what it writes (item ranges)."""
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import CONFIG, first_suggestion, inline, insert, start, status

pytestmark = pytest.mark.asyncio(loop_scope="module")

UNITS = {
    "utf-16": lambda s: len(s.encode("utf-16-le")) // 2,
    "utf-8": lambda s: len(s.encode("utf-8")),
    "utf-32": len,
}
LINE = '    greeting = "hi 😀, " + '     # the cursor goes at its end
TEXT = f"def greet(name):\n{LINE}\n"


@pytest.fixture(scope="module")
def model(model_that_says):
    """A model whose suggestion at the end of LINE has at least two characters: the test types one."""
    return model_that_says(TEXT.rstrip("\n"), "\n", lambda text: len(text) >= 2, dtype="fp32")


@pytest_lsp.fixture(config=CONFIG, params=[None, "utf-8", "utf-32"], loop_scope="module")
async def client(lsp_client: LanguageClient, request, model):
    offered = [request.param, "utf-16"] if request.param else None
    lsp_client.init_result = await start(lsp_client, model, encodings=offered)
    lsp_client.encoding = request.param or "utf-16"
    yield
    await lsp_client.shutdown_session()


async def test_negotiated_encoding_is_used_after_an_emoji(client: LanguageClient):
    units = UNITS[client.encoding]
    assert client.init_result.capabilities.position_encoding == client.encoding
    end = types.Position(1, units(LINE))
    assert units(LINE) != len(LINE) or client.encoding == "utf-32"

    # A column past the end means the end of the line: the range the server sends back is
    # counted in the negotiated unit from its own copy of the line.
    position, suggestion, rng = await first_suggestion(client, "file:///enc/greet.py", TEXT,
                                                       [types.Position(1, 999)])
    assert rng == types.Range(end, end)

    # Type the suggestion's first character there: the server must put it exactly at the end
    # of the line for the typing-through cache to recognise the text it suggested for.
    typed = suggestion[:1]
    before = await status(client)
    insert(client, "file:///enc/greet.py", 2, end, typed)
    after_typing = types.Position(1, end.character + units(typed))
    result = await inline(client, "file:///enc/greet.py", after_typing)
    assert result.items and result.items[0].insert_text == suggestion[1:]
    assert result.items[0].range == types.Range(after_typing, after_typing)
    assert (await status(client)).cacheHits == before.cacheHits + 1
