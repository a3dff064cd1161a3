"""spanfill's warnings and errors, forwarded to the client as window/logMessage: the handler that
`SpanfillServer.forward_logs` puts on the "spanfill" logger."""
from __future__ import annotations

import asyncio
import logging

from lsprotocol import types
from pygls.lsp.server import LanguageServer


class ClientLogHandler(logging.Handler):
    """Forward warnings to the client as window/logMessage, from any thread, through the event loop
    of the connection (`SpanfillServer.forward_logs` sets it). A record logged after that loop has
    closed (a worker finishing after the client left), or after `exit`, has no client to go to: it is
    dropped here, and stderr or the log file still has it."""

    LEVELS = {logging.ERROR: types.MessageType.Error, logging.WARNING: types.MessageType.Warning}

    def __init__(self, ls: LanguageServer):
        super().__init__(level=logging.WARNING)
        self.ls = ls
        self.loop: asyncio.AbstractEventLoop | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.loop is None or self.loop.is_closed() or getattr(self.ls, "closing", False):
            return
        kind = self.LEVELS[logging.ERROR if record.levelno >= logging.ERROR else logging.WARNING]
        params = types.LogMessageParams(type=kind, message=self.format(record))
        try:
            self.loop.call_soon_threadsafe(self.ls.window_log_message, params)
        except RuntimeError:      # the loop closed since the check above, on another thread
            pass
