"""spanfill's warnings reach the client as window/logMessage: once per warning however often the
client initializes, on the loop of the latest connection, and a warning logged after that loop
has closed (a worker thread finishing after the client left) is dropped, not raised at the caller;
a server that shuts down stops forwarding."""
import asyncio
import logging

import pytest
from lsprotocol import types

from spanfill.server import lsp

log = logging.getLogger("spanfill.server.test_client_log")
PARAMS = types.InitializeParams(capabilities=types.ClientCapabilities())


@pytest.fixture
def server(monkeypatch):
    """A server whose window/logMessage calls are recorded; spanfill's handlers restored afterwards."""
    handlers = list(logging.getLogger("spanfill").handlers)
    server = lsp.SpanfillServer()
    server.sent = []
    monkeypatch.setattr(server, "window_log_message", lambda params: server.sent.append(params.message))
    yield server
    logging.getLogger("spanfill").handlers[:] = handlers


def test_a_warning_after_the_loop_closed_is_dropped_not_raised(server):
    asyncio.run(lsp.on_initialize(server, PARAMS))
    assert server.client_log in logging.getLogger("spanfill").handlers and server.client_log.loop.is_closed()
    log.warning("logged once the client has gone")
    assert server.sent == []


def test_initializing_twice_forwards_each_warning_once(server):
    async def connection():
        await lsp.on_initialize(server, PARAMS)
        await lsp.on_initialize(server, PARAMS)
        log.warning("one warning")
        await asyncio.sleep(0)            # the forwarded call runs on the loop
    asyncio.run(connection())
    assert server.sent == ["one warning"]


def test_a_new_connection_gets_the_warnings(server):
    asyncio.run(lsp.on_initialize(server, PARAMS))

    async def second_connection():
        await lsp.on_initialize(server, PARAMS)
        log.warning("for the second client")
        await asyncio.sleep(0)
    asyncio.run(second_connection())
    assert server.sent == ["for the second client"]


def test_a_server_that_shuts_down_stops_forwarding(server):
    asyncio.run(lsp.on_initialize(server, PARAMS))
    assert server.client_log in logging.getLogger("spanfill").handlers
    server.shutdown()
    assert server.client_log not in logging.getLogger("spanfill").handlers
