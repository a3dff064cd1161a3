"""End-to-end: spanfill/accepted and spanfill/rejected with an id that is not a string (a number,
a boolean, an object, a list) are ignored with a log message naming the id; they are notifications,
so there is no response to put an error in. A verdict without an id still counts. The spanfill.accept
command is a request: it refuses such an id with InvalidParams."""
import json

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest
from pytest_lsp import LanguageClient

from lsp_helpers import CONFIG, start, status

pytestmark = pytest.mark.asyncio(loop_scope="module")

BAD_IDS = [42, True, {"id": "s1"}, ["s1"]]


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, tiny_model):
    await start(lsp_client, tiny_model)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.parametrize("method", ["spanfill/accepted", "spanfill/rejected"])
async def test_an_id_that_is_not_a_string_is_ignored_and_logged(client: LanguageClient, method):
    before = await status(client)
    for sid in BAD_IDS * 2:
        client.protocol.notify(method, {"id": sid})
    after = await status(client)
    assert (after.accepted, after.rejected) == (before.accepted, before.rejected), "a bad id was counted"
    for sid in BAD_IDS:
        assert any(method in m.message and json.dumps(sid) in m.message and "not a string" in m.message
                   for m in client.log_messages), f"nothing logged for id {sid!r}"


async def test_a_verdict_without_an_id_still_counts(client: LanguageClient):
    before = await status(client)
    client.protocol.notify("spanfill/accepted", {})
    client.protocol.notify("spanfill/rejected", {"id": None})
    after = await status(client)
    assert (after.accepted, after.rejected) == (before.accepted + 1, before.rejected + 1)
    assert after.state == "ready"


@pytest.mark.parametrize("arguments", [[42], [None], [{"id": "s1"}], [], None])
async def test_the_accept_command_refuses_an_id_that_is_not_a_string(client: LanguageClient, arguments):
    before = await status(client)
    with pytest.raises(JsonRpcInvalidParams, match="first argument"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command="spanfill.accept",
                                                                                arguments=arguments))
    assert (await status(client)).accepted == before.accepted


@pytest.mark.parametrize("params", [[1], "s1", 7])
async def test_feedback_whose_params_are_not_an_object_is_ignored_and_logged(client: LanguageClient, params):
    """Counted before as a verdict without an id (getattr of a list's `id` is None)."""
    before = await status(client)
    client.protocol.notify("spanfill/accepted", params)
    client.protocol.notify("spanfill/rejected", params)
    after = await status(client)
    assert (after.accepted, after.rejected) == (before.accepted, before.rejected)
    assert any("not an object" in m.message and json.dumps(params) in m.message for m in client.log_messages)


async def test_a_second_initialize_is_refused_and_changes_nothing(client: LanguageClient):
    """LSP allows initialize once; a second one was taken: its capabilities renegotiated the position
    encoding under the open documents and its initializationOptions replaced the settings."""
    before = await status(client)
    with pytest.raises(JsonRpcInvalidRequest, match="already received"):
        await client.protocol.send_request_async("initialize", types.InitializeParams(
            capabilities=types.ClientCapabilities(), initialization_options={"spanfill": {"model": "/nonexistent"}}))
    after = await status(client)
    assert after.settings.model == before.settings.model and after.state == "ready"
