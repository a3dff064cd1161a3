"""End-to-end: the real `spanfill serve` process over stdio, driven by pytest-lsp.

These tests assert protocol behaviour and robustness, so they run on the shipped model where it
suggests a line at BODY_CURSOR, and otherwise on a tiny random-weight model that does (conftest's
model_that_says; its suggestions are arbitrary text): the tests that need an answer there get one.
"""
import asyncio
import os
from collections import Counter

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from spanfill.server.headless import answered_by

from lsp_helpers import (CONFIG, SERVE, first_suggestion, inline, inline_params, insert, open_doc, popup, start,
                         starts_with_a_line, status, utf16_len)

pytestmark = pytest.mark.asyncio(loop_scope="module")

FUNCTION_BODY = '''import os


def file_sizes(paths):
    """Map each existing path to its size in bytes."""
    sizes = {}
    for path in paths:
        
    return sizes


def main():
    print(file_sizes(os.listdir(".")))
'''
BODY_CURSOR = types.Position(7, 8)
BODY_OFFSET = len("".join(FUNCTION_BODY.splitlines(keepends=True)[:BODY_CURSOR.line])) + BODY_CURSOR.character
DEBOUNCE_MS = 150


@pytest.fixture(scope="module")
def body_model(model_that_says):
    return model_that_says(FUNCTION_BODY[:BODY_OFFSET], FUNCTION_BODY[BODY_OFFSET:], starts_with_a_line, dtype="fp32")


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, body_model):
    # no other open file in the context (snippetFiles 0): BODY_CURSOR's context is the one body_model was chosen on
    lsp_client.init_result = await start(lsp_client, body_model, debounceMs=DEBOUNCE_MS, completionFallback=True,
                                         snippetFiles=0)
    yield
    await lsp_client.shutdown_session()


async def test_initialize_advertises_inline_completion(client: LanguageClient):
    caps = client.init_result.capabilities
    assert caps.inline_completion_provider is not None
    assert caps.position_encoding == types.PositionEncodingKind.Utf16
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert caps.completion_provider is not None                  # completionFallback was on
    kinds = [p.kind for reports in client.progress_reports.values() for p in reports]
    assert kinds[0] == "begin" and kinds[-1] == "end"           # $/progress while the model loaded
    st = await status(client)
    assert st.state == "ready"
    assert st.compile == "off" and st.compiledFallbacks is None  # the tests' servers stay eager
    assert st.threads == 1                    # OMP_NUM_THREADS=1: the one core is not left without a thread
    assert st.dtype == "float32" and st.int8Matmuls is False      # the tests ask for fp32


@pytest_lsp.fixture(config=ClientServerConfig(SERVE, server_env={**CONFIG.server_env, "OMP_NUM_THREADS": "2"}),
                    loop_scope="module")
async def two_core_client(lsp_client: LanguageClient, tiny_model):
    await start(lsp_client, tiny_model)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="torch sees one core at most here")
async def test_the_engine_leaves_one_of_two_cores_to_the_editor(two_core_client: LanguageClient):
    st = await status(two_core_client)                    # torch sees two cores in that server
    assert st.state == "ready" and st.threads == 1


async def test_items_replace_an_empty_range_at_the_cursor(client: LanguageClient):
    open_doc(client, "file:///e2e/body.py", FUNCTION_BODY)
    result = await inline(client, "file:///e2e/body.py", BODY_CURSOR)
    assert isinstance(result, types.InlineCompletionList)
    assert result.items, "no suggestion inside the function body"
    for item in result.items:
        assert item.range == types.Range(BODY_CURSOR, BODY_CURSOR) and item.insert_text.strip()
        assert item.command.command == "spanfill.accept"


async def test_typing_through_a_suggestion_is_served_from_the_cache(client: LanguageClient):
    uri = "file:///e2e/typing.py"
    position, text, _ = await first_suggestion(client, uri, FUNCTION_BODY, [BODY_CURSOR, types.Position(4, 4)])
    before = await status(client)
    typed = text[:2]
    insert(client, uri, 2, position, typed)
    at = types.Position(position.line, position.character + utf16_len(typed))
    result = await inline(client, uri, at)
    after = await status(client)
    assert result.items and result.items[0].insert_text == text[2:]
    assert result.items[0].range == types.Range(at, at)
    assert after.engineCalls == before.engineCalls              # the engine was not called
    assert after.cacheHits == before.cacheHits + 1
    assert answered_by(result.items) == "cache"                 # and the answer says so


BURST_DEBOUNCE_MS = 2000            # the longest the settings allow: the burst coalesces into few engine calls
ANSWER_TIMEOUT_S = 120              # only a request left unanswered waits it out


async def test_burst_of_50_requests_with_cancellations(client: LanguageClient, monkeypatch):
    """Type 50 characters with an automatic request after each and cancel every 5th: every request
    is answered exactly once, with RequestCancelled only where the test cancelled, the server's
    counters give each request one outcome (superseded, cancelled or answered), and it still answers
    afterwards.

    The debounce runs on the server's clock, in another process, so which requests end superseded
    depends on how fast the burst reaches it: the verdict rests only on what holds at any speed.
    Which outcome the debounce gives each request is tested in tests/server/test_completion.py, on
    a clock that test advances."""
    uri = "file:///e2e/burst.py"
    open_doc(client, uri, "def total(values):\n    \n")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"debounceMs": BURST_DEBOUNCE_MS}}))
    before = await status(client)
    assert before.settings.debounceMs == BURST_DEBOUNCE_MS
    answers = Counter()
    handle_response = client.protocol._handle_response

    def count_answer(msg_id, *args, **kwargs):
        answers[msg_id] += 1
        return handle_response(msg_id, *args, **kwargs)
    monkeypatch.setattr(client.protocol, "_handle_response", count_answer)

    typed = "result = sum(v for v in values if v is not None) "[:50].ljust(50)
    ids = [f"burst-{i}" for i in range(len(typed))]
    pending, cancelled = [], set()
    for i, ch in enumerate(typed):
        insert(client, uri, 2 + i, types.Position(1, 4 + i), ch)
        params = inline_params(uri, types.Position(1, 5 + i), invoked=False)
        pending.append(asyncio.ensure_future(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=ids[i])))
        await asyncio.sleep(0)                                  # let the request go out
        if i % 5 == 2:
            client.cancel_request(types.CancelParams(id=ids[i]))
            cancelled.add(i)
    _, unanswered = await asyncio.wait(pending, timeout=ANSWER_TIMEOUT_S)
    assert not unanswered, f"{len(unanswered)} of the 50 requests unanswered after {ANSWER_TIMEOUT_S} s"
    after = await status(client)                # a second answer sent before this one is counted
    assert {msg_id: answers[msg_id] for msg_id in ids} == dict.fromkeys(ids, 1)

    refused = 0
    for i, request in enumerate(pending):
        if isinstance(error := request.exception(), JsonRpcException):
            assert i in cancelled and error.code == types.LSPErrorCodes.RequestCancelled, f"request {i}: {error}"
            refused += 1
        else:
            assert isinstance(request.result(), types.InlineCompletionList), f"request {i}: {request.result()!r}"
    answered = after.latencyMs.count - before.latencyMs.count
    assert after.requests - before.requests == 50
    assert after.cancelled - before.cancelled == refused
    assert after.superseded - before.superseded + refused + answered == 50
    assert after.errors == before.errors
    assert answered >= 1                          # the last request: nothing supersedes it
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"spanfill": {"debounceMs": DEBOUNCE_MS}}))
    result = await inline(client, uri, types.Position(1, 54))   # still serving
    assert isinstance(result, types.InlineCompletionList)


async def test_settings_change_takes_effect(client: LanguageClient):
    uri = "file:///e2e/settings.py"
    open_doc(client, uri, FUNCTION_BODY)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"enable": {"*": False}, "steps": 0, "spanLength": 12}}))
    before = await status(client)
    assert not (await inline(client, uri, BODY_CURSOR)).items
    after = await status(client)
    assert after.engineCalls == before.engineCalls
    assert after.settings.spanLength == 12 and after.settings.steps is None     # steps=0 was rejected
    assert any("steps=0" in m.message for m in client.messages)                  # ... shown
    assert any("steps=0" in m.message for m in client.log_messages)              # ... and logged
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"enable": {"*": True}, "spanLength": None}}))
    await inline(client, uri, BODY_CURSOR)
    assert (await status(client)).engineCalls == after.engineCalls + 1


async def test_bad_requests_get_clean_answers_and_the_server_keeps_serving(client: LanguageClient):
    unopened = await inline(client, "file:///e2e/never-opened.py", types.Position(0, 0))
    assert not unopened.items
    uri = "file:///e2e/range.py"
    open_doc(client, uri, "x = 1\n")
    assert not (await inline(client, uri, types.Position(40, 0))).items
    open_doc(client, "file:///e2e/past_end.py", FUNCTION_BODY)       # a column past the end: the line end
    past_end = await inline(client, "file:///e2e/past_end.py", types.Position(BODY_CURSOR.line, 400))
    assert past_end.items and all(item.range == types.Range(BODY_CURSOR, BODY_CURSOR) for item in past_end.items)

    big = "file:///e2e/big.py"
    line = "data = [" + ", ".join(["1234567"] * 560_000) + "]"
    assert len(line) > 5_000_000
    open_doc(client, big, line)
    for character in (len(line) - 1, 2_500_000):
        result = await asyncio.wait_for(inline(client, big, types.Position(0, character)), 60)
        assert isinstance(result, types.InlineCompletionList)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(big)))

    assert (await status(client)).state == "ready"
    assert isinstance(await inline(client, "file:///e2e/body.py", BODY_CURSOR), types.InlineCompletionList)


async def test_completion_fallback_items_are_single_line(client: LanguageClient):
    uri = "file:///e2e/fallback.py"
    open_doc(client, uri, FUNCTION_BODY)
    result = await popup(client, uri, BODY_CURSOR)
    assert result.items, "no fallback item inside the function body"
    for item in result.items:
        assert "\n" not in item.text_edit.new_text and item.text_edit.new_text.strip()
        assert item.text_edit.range == types.Range(BODY_CURSOR, BODY_CURSOR)


async def test_accept_and_reject_feed_the_statistics(client: LanguageClient):
    position, _, _ = await first_suggestion(client, "file:///e2e/feedback.py", FUNCTION_BODY, [BODY_CURSOR])
    result = await inline(client, "file:///e2e/feedback.py", position)
    sid = result.items[0].command.arguments[0]
    before = await status(client)
    await client.workspace_execute_command_async(types.ExecuteCommandParams(command="spanfill.accept",
                                                                            arguments=[sid]))
    client.protocol.notify("spanfill/rejected", {"id": sid})       # already counted: ignored
    client.protocol.notify("spanfill/rejected", {})                # a client that sends no id
    after = await status(client)
    assert (after.accepted, after.rejected) == (before.accepted + 1, before.rejected + 1)


async def test_a_model_that_fails_to_load_is_reported_and_the_old_one_kept(client: LanguageClient, tmp_path):
    model = (await status(client)).model
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"model": str(tmp_path / "missing")}}))
    for _ in range(100):
        if any("could not load model" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.05)
    message = next(m for m in client.messages if "could not load model" in m.message)
    assert message.type == types.MessageType.Error and "missing" in message.message
    after = await status(client)
    assert after.state == "ready" and after.model == model and after.settings.model == model
