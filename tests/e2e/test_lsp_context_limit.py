"""End-to-end: `maxContextTokens` above what the model holds. The server cuts it to the model's
positions less the span, says so once with window/showMessage (the setting, the value asked, the
value used), follows a model change, and keeps answering in the middle of a long file."""
import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from long_context import LONG_FILE, MIDDLE, SPAN
from lsp_helpers import CONFIG, inline, open_doc, start, status

pytestmark = pytest.mark.asyncio(loop_scope="module")

URI = "file:///e2e/long.py"
LOAD_TIMEOUT_S = 30     # loading a tiny model on a busy machine; only a failing run waits it out


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, small_models):
    await start(lsp_client, small_models[0], maxContextTokens=8192)
    yield
    await lsp_client.shutdown_session()


def cut_messages(client: LanguageClient) -> list[types.ShowMessageParams]:
    return [m for m in client.messages if "maxContextTokens" in m.message]


async def test_a_budget_above_the_model_is_cut_said_once_and_answered(client: LanguageClient):
    (shown,) = cut_messages(client)                 # at load, before any completion
    assert shown.type == types.MessageType.Warning
    assert "maxContextTokens=8192" in shown.message and f"using {256 - SPAN}" in shown.message
    open_doc(client, URI, LONG_FILE)
    assert isinstance(await inline(client, URI, MIDDLE), types.InlineCompletionList)
    st = await status(client)
    assert (st.engineCalls, st.errors) == (1, 0), "the engine refused the context"
    await inline(client, URI, MIDDLE)
    assert len(cut_messages(client)) == 1
    assert st.settings.maxContextTokens == 8192     # the setting stays as asked


async def test_the_cut_follows_a_model_change(client: LanguageClient, small_models):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"model": str(small_models[1])}}))

    async def second_cut() -> None:
        while len(cut_messages(client)) < 2:
            await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    try:
        await asyncio.wait_for(second_cut(), LOAD_TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(f"nothing said about the new model's limit within {LOAD_TIMEOUT_S} s")
    assert len(cut_messages(client)) == 2
    assert f"using {512 - SPAN}" in cut_messages(client)[1].message
    before = await status(client)
    assert before.model == str(small_models[1])
    await inline(client, URI, types.Position(MIDDLE.line + 30, 0))   # not the cached position
    after = await status(client)
    assert (after.engineCalls - before.engineCalls, after.errors) == (1, 0)
