"""End-to-end: settings that arrive after initialize. `workspace/didChangeConfiguration` with the
settings in it (push) switches the completion fallback on, which the server registers with a client
that allows dynamic registration; an empty one makes the server ask for its section with
`workspace/configuration` (pull)."""
import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from spanfill.server.headless import wait_until_loaded

from lsp_helpers import CONFIG, capabilities, open_doc, options, starts_with_a_line, status

pytestmark = pytest.mark.asyncio(loop_scope="module")

URI = "file:///config/add.py"
TEXT = "def add(a, b):\n    return \n"
CURSOR = types.Position(1, len("    return "))
TIMEOUT_S = 10          # for what the server sends at once; no verdict waits on it


async def within_timeout(awaitable, what: str):
    try:
        return await asyncio.wait_for(awaitable, TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(f"no {what} within {TIMEOUT_S} s")


@pytest.fixture(scope="module")
def model(model_that_says):
    """A model whose suggestion at CURSOR has a first line, which is what the fallback offers."""
    offset = TEXT.index("return ") + len("return ")
    return model_that_says(TEXT[:offset], TEXT[offset:], starts_with_a_line, dtype="fp32")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, model):
    lsp_client.registered = asyncio.Queue()

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        for registration in params.registrations:
            lsp_client.registered.put_nowait(registration)

    caps = capabilities()
    caps.workspace = types.WorkspaceClientCapabilities(configuration=True)
    caps.text_document.completion = types.CompletionClientCapabilities(dynamic_registration=True)
    lsp_client.init_result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=caps, initialization_options=options(model)))
    assert (await wait_until_loaded(lsp_client)).state == "ready"
    yield
    await lsp_client.shutdown_session()


async def test_completion_fallback_switched_on_by_a_configuration_change(client: LanguageClient):
    assert client.init_result.capabilities.completion_provider is None          # off at initialize
    open_doc(client, URI, TEXT)
    params = types.CompletionParams(text_document=types.TextDocumentIdentifier(URI), position=CURSOR)
    with pytest.raises(JsonRpcException) as refused:
        await client.text_document_completion_async(params)
    assert refused.value.code == types.ErrorCodes.MethodNotFound

    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"completionFallback": True}}))
    registration = await within_timeout(client.registered.get(), "client/registerCapability from the server")
    assert registration.method == types.TEXT_DOCUMENT_COMPLETION
    result = await client.text_document_completion_async(params)
    assert result.items, "the fallback is on but offered nothing"
    for item in result.items:
        assert item.text_edit.range == types.Range(CURSOR, CURSOR) and "\n" not in item.text_edit.new_text
    assert (await status(client)).settings.completionFallback is True


async def test_an_empty_configuration_change_pulls_the_spanfill_section(client: LanguageClient):
    before = await status(client)
    assert before.settings.spanLength is None
    client.set_configuration({"spanLength": 12, "steps": 0}, section="spanfill")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def shown(text: str) -> None:
        while not any(text in m.message for m in client.messages):
            await client.wait_for_notification(types.WINDOW_SHOW_MESSAGE)
    await within_timeout(shown("steps=0"), "message refusing the pulled steps=0")   # the pulled settings were applied
    after = await status(client)
    assert after.settings.spanLength == 12 and after.settings.steps is None      # steps=0 was refused
