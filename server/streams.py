"""LSP's framing as the server reads it off its input: `Content-Length` header lines, a blank line,
a body; from stdin (what editors start the server with) or from a TCP socket. pygls's message loop
(pygls.io_.run_async) reads any object with `readline()` and `readexactly(n)`; these are the ones
it reads here.

* `MessageReader` over a TCP connection's asyncio stream, or over `ReadableFd`: stdin where it is a
  pipe or a socket (as editors and test clients start the server), read on the event loop. pygls's
  own stdin reader waits on a thread for every header line and every body: three hand-overs between
  threads a message, each a wake-up, in the latency of every request (benchmarks/protocol_rtt.py
  measures the round trip).
* `ChunkedInput`: stdin where the event loop cannot wait on it (a file, a terminal, /dev/null; any
  stdin off POSIX), read on pygls's thread.

Both read a header line at most HEADER_LINE_LIMIT bytes at a time (the rest of a longer one comes as
further lines, which match no header), so a line without a break cannot grow without bound, and a
body as it arrives, so the length a header claims (`Content-Length: 10**14`) is never allocated up
front.
"""
from __future__ import annotations

import asyncio
import os
import re
import stat
from concurrent.futures import Executor
from typing import BinaryIO

from pygls.io_ import StdinAsyncReader

HEADER_LINE_LIMIT = 1 << 16     # the longest header line read at once (64 KiB)
CHUNK = 1 << 20                 # the most a blocking body read takes at once (ChunkedInput)
# the most one read on the event loop asks for: a pipe holds 64 KiB, and os.read allocates what it is
# asked for before it reads (a 1 MiB request costs a fresh mapping, ~20x the time of a 300-byte message)
READ_SIZE = 1 << 16
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)


def header_line(line: bytes) -> bytes:
    """A header line as pygls's message loop matches it (`Content-Length: N\\r\\n` exactly): header
    names are case-insensitive and may have spaces around the colon, and a client that ends lines
    with \\n alone is read too. pygls missed such a header, read the body as the next header and lost
    every message after it, unanswered."""
    match = _CONTENT_LENGTH.fullmatch(line)
    return b"Content-Length: %s\r\n" % match.group(1) if match else line


class ReadableFd:
    """A pipe's or socket's file descriptor read on the event loop: each read waits until the loop
    sees data (or the end), then takes what is there. The descriptor stays blocking: asyncio's pipe
    transport would make it non-blocking, a flag its whole open file shares, and where stdin and
    stdout are one socket (socat, inetd, systemd socket activation) the blocking writes of the
    responses would fail whenever the client reads late."""

    def __init__(self, fd: int):
        self.fd = fd

    async def read(self, n: int) -> bytes:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(self.fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(self.fd)
        return os.read(self.fd, n)      # the loop saw it readable: returns what is there without waiting


class MessageReader:
    """An asyncio stream as pygls's message loop reads it, giving the event loop a turn before each
    header line.

    An asyncio stream answers from its buffer without suspending, so the loop would handle every
    message of a chunk before a request's coroutine first ran: a didChange sent right after an
    inlineCompletion would move the document before the request read its cursor, and the suggestion
    would be made for text the request never saw. With a turn between messages a request takes its
    snapshot of the document (completion._locate, before its first await) before the next message
    is handled. At the end of input: b"" (which ends the loop), also in the middle of a body."""

    def __init__(self, stream: asyncio.StreamReader | ReadableFd):
        self._stream = stream
        self._buffer = bytearray()

    async def _more(self) -> bool:
        chunk = await self._stream.read(READ_SIZE)
        self._buffer += chunk
        return bool(chunk)

    async def readline(self) -> bytes:
        await asyncio.sleep(0)
        while True:
            end = self._buffer.find(b"\n", 0, HEADER_LINE_LIMIT)
            if end >= 0 or len(self._buffer) >= HEADER_LINE_LIMIT:
                n = end + 1 if end >= 0 else HEADER_LINE_LIMIT
                line = bytes(self._buffer[:n])
                del self._buffer[:n]
                return header_line(line)
            if not await self._more():
                line = bytes(self._buffer)
                self._buffer.clear()
                return line

    async def readexactly(self, n: int) -> bytes:
        while len(self._buffer) < n:
            if not await self._more():
                self._buffer.clear()
                return b""
        body = bytes(self._buffer[:n])
        del self._buffer[:n]
        return body


class ChunkedInput:
    """A blocking binary stream as pygls's threaded stdio reader uses it (readline, read(n)), whose
    read(n) takes what arrives a chunk at a time: a buffered read(n) allocates n bytes first."""

    def __init__(self, stream: BinaryIO):
        self._stream = stream

    def readline(self) -> bytes:
        return header_line(self._stream.readline(HEADER_LINE_LIMIT))

    def read(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self._stream.read(min(left, CHUNK))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


def waitable(stream: BinaryIO) -> bool:
    """Whether `stream` is read on the event loop: a pipe or a socket (what clients start a server
    with), on POSIX. Anything else keeps pygls's reader: epoll refuses a file and /dev/null."""
    if os.name != "posix":     # Windows' proactor loop waits on overlapped handles only
        return False
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (OSError, ValueError, AttributeError):    # no file descriptor (a test's BytesIO), or a closed one
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def stdin_reader(stdin: BinaryIO, executor: Executor | None) -> MessageReader | StdinAsyncReader:
    """The reader of `stdin` for pygls's message loop: on the event loop where it can wait on it,
    else on `executor`'s threads (pygls's reader over ChunkedInput)."""
    if waitable(stdin):
        return MessageReader(ReadableFd(stdin.fileno()))
    return StdinAsyncReader(ChunkedInput(stdin), executor)
