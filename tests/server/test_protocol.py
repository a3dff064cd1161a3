"""The protocol keeps no future past its handler: pygls files every coroutine or generator handler's
future under its message id and took out only those of answered requests, so each notification
(didChange: one per keystroke) left one behind for good."""
import asyncio
from concurrent.futures import Future

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

    server.protocol._initialize_seen = True     # as after initialize: notifications before it are dropped

    for version in range(2, 102):              # generator handlers (pygls's own document notifications)
        deliver(server, did_change(version))
    for _ in range(10):
        deliver(server, {"jsonrpc": "2.0", "method": "spanfill/test", "params": {}})
    await asyncio.sleep(0.05)                  # the coroutines run and finish
    assert len(seen) == 10
    assert server.protocol._request_futures == {}     # pygls's private table is where they piled up


def test_shutdown_cancels_pending_futures_that_take_themselves_out():
    """pygls's shutdown cancels every future while iterating over the table; each one's done callback
    removes it from the table, which must not break that iteration (it did: shutdown answered an
    internal error and a TCP client waited for the server to exit)."""
    server = SpanfillServer()
    pending = [Future() for _ in range(3)]        # pygls's own kind: callbacks run inside cancel()
    for i, future in enumerate(pending):
        server.protocol._request_futures[f"n{i}"] = future
        future.add_done_callback(lambda f, i=i: server.protocol._forget_future(f"n{i}", f))
    for _, future in server.protocol._request_futures.items():
        future.cancel()
    assert server.protocol._request_futures == {}
