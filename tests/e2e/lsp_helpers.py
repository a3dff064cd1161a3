"""Helpers for the pytest-lsp tests: how to start `spanfill serve`, the client's capabilities,
and short forms of the requests the tests send."""
from __future__ import annotations

import asyncio
import os
import sys

import pytest

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

SERVE = [sys.executable, "-m", "spanfill.server.cli", "serve"]
CONFIG = ClientServerConfig(server_command=SERVE, server_env={**os.environ, "OMP_NUM_THREADS": "1"})


def capabilities(encodings: list[str] | None = None) -> types.ClientCapabilities:
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=encodings),
        window=types.WindowClientCapabilities(work_done_progress=True),
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(),
            completion=types.CompletionClientCapabilities(),
            synchronization=types.TextDocumentSyncClientCapabilities()))


def options(model, **extra) -> dict:
    """initializationOptions: the model on the CPU in fp32 (deterministic), plus `extra`."""
    return {"spanfill": {"model": str(model), "device": "cpu", "dtype": "fp32", **extra}}


async def start(client: LanguageClient, model, encodings: list[str] | None = None, **extra):
    result = await client.initialize_session(types.InitializeParams(
        capabilities=capabilities(encodings), initialization_options=options(model, **extra)))
    for _ in range(600):
        if (await status(client)).state in ("ready", "failed"):
            break
        await asyncio.sleep(0.1)
    return result


async def status(client: LanguageClient):
    return await client.protocol.send_request_async("spanfill/status", {})


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, language, 1, text)))


def insert(client: LanguageClient, uri: str, version: int, position: types.Position, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=version, uri=uri),
        [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=text)]))


def inline_params(uri: str, position: types.Position, invoked: bool = True,
                  selected: types.SelectedCompletionInfo | None = None) -> types.InlineCompletionParams:
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=kind, selected_completion_info=selected),
        text_document=types.TextDocumentIdentifier(uri), position=position)


async def inline(client: LanguageClient, uri: str, position: types.Position, invoked: bool = True):
    return await client.text_document_inline_completion_async(inline_params(uri, position, invoked))


async def popup(client: LanguageClient, uri: str, position: types.Position) -> types.CompletionList:
    """textDocument/completion at `position`: the server's fallback items for clients without inline completion."""
    return await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=position))


async def first_suggestion(client: LanguageClient, uri: str, text: str, positions: list[types.Position],
                           language: str = "python"):
    """Open `text` (as `language`) and return (position, insert text, range) at the first of `positions`
    where the model proposes something; fail if it proposes nothing anywhere."""
    open_doc(client, uri, text, language)
    for position in positions:
        result = await inline(client, uri, position)
        if result.items:
            return position, result.items[0].insert_text, result.items[0].range
    pytest.fail("the model proposed nothing at any of the positions tried")


def starts_with_a_line(text: str) -> bool:
    """Whether `text` has a non-blank first line: the completion fallback offers only that line."""
    return bool(text.strip()) and bool(text.splitlines()[0].strip())


def closes_an_open_paren(text: str) -> bool:
    """Whether `text` has a ")" that matches no "(" of its own (it would close one before the cursor)."""
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return True
    return False
