"""A headless editor for `spanfill serve`: start the real server as a subprocess, talk LSP to it
with pygls's client, and edit documents the way an editor does (didOpen, incremental didChange,
inline-completion requests). `spanfill demo` and benchmarks/replay.py are built on it.
"""
from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

LOAD_TIMEOUT_S = 300
LOG_MESSAGES = 100


def make_client(name: str) -> LanguageClient:
    """A client that accepts the server's progress tokens and prints its progress and messages
    (window/showMessage); its log records (window/logMessage) are kept in `client.log_messages`."""
    client = LanguageClient(name, "0.1.0")

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def progress_create(params):
        return None

    @client.feature(types.PROGRESS)
    def progress(params):
        if isinstance(params.value, dict) and params.value.get("message"):
            print(f"  server: {params.value['message']}")

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show_message(params):
        print(f"  server says: {params.message}")

    # the server's warnings (slow engine calls, ...), the last LOG_MESSAGES kept, not printed: its
    # --log-file holds them all
    client.log_messages = deque(maxlen=LOG_MESSAGES)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def log_message(params):
        client.log_messages.append(params.message)

    return client


async def status(client: LanguageClient):
    return await client.protocol.send_request_async("spanfill/status", {})


async def wait_until_loaded(client: LanguageClient):
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        st = await status(client)
        if st.state in ("ready", "failed"):
            return st
        await asyncio.sleep(0.1)
    return st


async def wait_until_compiled(client: LanguageClient, timeout_s: float = 900.0):
    """The status once the engine's CPU steps are no longer being compiled (or the timeout passed).
    The server compiles on its threads (one, on 2 cores), which takes minutes, longest on a CPU
    without AMX, so the wait is generous."""
    deadline = time.monotonic() + timeout_s
    st = await status(client)
    while st.compile == "compiling" and time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        st = await status(client)
    return st


async def start(client: LanguageClient, log_file: Path, *, script: str | None = None, env: dict | None = None,
                **settings):
    """Start `spanfill serve` (logging to `log_file`), initialize it with `settings` (the
    "spanfill" section of initializationOptions), and return its status once the model loaded or
    failed to. script: Python source run instead of `spanfill serve` (a benchmark's variant of the
    server, which logs to `log_file` itself); env: the server's environment (default: this process's)."""
    args = ("-c", script) if script is not None else ("-m", "spanfill.server.cli", "serve", "--log-file", str(log_file))
    await client.start_io(sys.executable, *args, env=env)
    caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
    await client.initialize_async(types.InitializeParams(capabilities=caps,
                                                        initialization_options={"spanfill": settings}))
    client.initialized(types.InitializedParams())
    return await wait_until_loaded(client)


async def stop(client: LanguageClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


def answered_by(items) -> str:
    """Who answered an inline completion, as the server reports it in each item's command
    (`arguments[1]["source"]`): "cache" (the typing-through cache) or "engine"; an empty answer is the engine's."""
    for item in items:
        args = item.command.arguments if item.command is not None else None
        if args and len(args) > 1:
            info = args[1]
            source = info.get("source") if isinstance(info, dict) else getattr(info, "source", None)
            if source:
                return source
    return "engine"


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class ClientDocument:
    """One open document as the editor keeps it: its lines, a version, incremental edits.
    Positions are LSP positions (UTF-16 columns, the protocol's default encoding)."""

    def __init__(self, client: LanguageClient, uri: str, text: str, language: str = "python"):
        self.client, self.uri = client, uri
        self.lines = text.split("\n")
        self.version = 1
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri, language, 1, text)))

    def position_at(self, offset: int) -> types.Position:
        """The position of character `offset` of the text."""
        before = "\n".join(self.lines)[:offset]
        line_start = before.rfind("\n") + 1
        return types.Position(before.count("\n"), utf16_len(before[line_start:]))

    def insert(self, at: types.Position, text: str) -> types.Position:
        """Type `text` at `at` (one didChange); returns the cursor after it."""
        self.version += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=self.version, uri=self.uri),
            [types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)]))
        line = self.lines[at.line]
        column = len(line.encode("utf-16-le")[:2 * at.character].decode("utf-16-le"))
        head = (line[:column] + text).split("\n")
        self.lines[at.line:at.line + 1] = head[:-1] + [head[-1] + line[column:]]
        return types.Position(at.line + len(head) - 1, utf16_len(head[-1]))

    def inline_params(self, at: types.Position, invoked: bool) -> types.InlineCompletionParams:
        kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
        return types.InlineCompletionParams(context=types.InlineCompletionContext(trigger_kind=kind),
                                            text_document=types.TextDocumentIdentifier(self.uri), position=at)

    def close(self) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(self.uri)))
