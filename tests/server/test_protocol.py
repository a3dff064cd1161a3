"""The protocol keeps no future past its handler: pygls files every coroutine or generator handler's
future under its message id and took out only those of answered requests, so each notification
(didChange: one per keystroke) left one behind for good."""
import asyncio

from spanfill.server.lsp import SpanfillServer


def did_change(version: int) -> dict:
    return {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": "file:///w/a.py", "version": version},
        "contentChanges": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                            "text": "x"}]}}


def deliver(server: SpanfillServer, message: dict) -> None:
    server.protocol.handle_message(server.protocol.structure_message(message))


async def test_notification_handlers_leave_no_futures_behind():
    server = SpanfillServer()
    seen = []

    @server.feature("spanfill/test")          # a coroutine notification handler
    async def on_test(ls, params):
        seen.append(params)

    for version in range(2, 102):              # generator handlers (pygls's own document notifications)
        deliver(server, did_change(version))
    for _ in range(10):
        deliver(server, {"jsonrpc": "2.0", "method": "spanfill/test", "params": {}})
    await asyncio.sleep(0.05)                  # the coroutines run and finish
    assert len(seen) == 10
    assert server.protocol._request_futures == {}     # pygls's private table is where they piled up
