"""The readers of LSP's framing (streams.py): header lines and bodies off an asyncio stream, turn
taking between messages, the end of input, and which reader stdin gets."""
import asyncio
import io
import os
import socket

from pygls.io_ import StdinAsyncReader

from spanfill.server.streams import HEADER_LINE_LIMIT, ChunkedInput, MessageReader, ReadableFd, stdin_reader, waitable


def stream_of(data: bytes, eof: bool = True) -> asyncio.StreamReader:
    stream = asyncio.StreamReader()
    stream.feed_data(data)
    if eof:
        stream.feed_eof()
    return stream


def test_header_lines_and_bodies_are_read_in_order_and_headers_normalised():
    async def run():
        reader = MessageReader(stream_of(b"content-length:  5 \nX-Other: 1\r\n\r\nhello" b"Content-Length: 2\r\n\r\nok"))
        got = [await reader.readline(), await reader.readline(), await reader.readline(), await reader.readexactly(5),
               await reader.readline(), await reader.readline(), await reader.readexactly(2), await reader.readline()]
        return got
    assert asyncio.run(run()) == [b"Content-Length: 5\r\n", b"X-Other: 1\r\n", b"\r\n", b"hello",
                                  b"Content-Length: 2\r\n", b"\r\n", b"ok", b""]


def test_a_header_line_past_the_limit_comes_in_pieces_and_what_follows_it_is_kept():
    long_line = b"x" * (HEADER_LINE_LIMIT * 2 + 10) + b"\r\n"

    async def run():
        reader = MessageReader(stream_of(long_line + b"Content-Length: 1\r\n\r\n!"))
        pieces = [await reader.readline() for _ in range(3)]
        return pieces, [await reader.readline(), await reader.readline(), await reader.readexactly(1)]
    pieces, message = asyncio.run(run())
    assert [len(p) for p in pieces] == [HEADER_LINE_LIMIT, HEADER_LINE_LIMIT, 12] and b"".join(pieces) == long_line
    assert message == [b"Content-Length: 1\r\n", b"\r\n", b"!"]


def test_a_body_is_awaited_as_it_arrives_and_the_end_of_input_inside_one_ends_the_loop():
    async def run():
        stream = stream_of(b"abc", eof=False)
        reader = MessageReader(stream)
        body = asyncio.ensure_future(reader.readexactly(10**14))     # a claim nothing is allocated for
        await asyncio.sleep(0.01)
        assert not body.done()
        stream.feed_data(b"def")
        stream.feed_eof()
        return await body
    assert asyncio.run(run()) == b""


def test_a_request_coroutine_runs_before_the_next_message_is_read():
    """The turn before each header line: what a handler scheduled (a request's task) runs before the
    loop reads on, though the next message is already buffered."""
    order = []

    async def run():
        reader = MessageReader(stream_of(b"A\nB\n"))
        order.append(await reader.readline())

        async def handler():
            order.append("handler")
        asyncio.ensure_future(handler())
        order.append(await reader.readline())
    asyncio.run(run())
    assert order == [b"A\n", "handler", b"B\n"]


def test_chunked_input_reads_a_long_header_line_in_pieces_and_a_body_as_it_comes():
    data = b"y" * (HEADER_LINE_LIMIT + 5) + b"\ncontent-length: 3\r\n" + b"abc"
    chunked = ChunkedInput(io.BufferedReader(io.BytesIO(data)))
    assert len(chunked.readline()) == HEADER_LINE_LIMIT
    assert chunked.readline() == b"yyyyy\n"
    assert chunked.readline() == b"Content-Length: 3\r\n"
    assert chunked.read(10**14) == b"abc"


def test_pipes_and_sockets_are_read_on_the_event_loop_files_and_devices_on_a_thread(tmp_path):
    read_end, write_end = os.pipe()
    left, right = socket.socketpair()
    path = tmp_path / "input"
    path.write_bytes(b"")
    with os.fdopen(read_end, "rb") as pipe, os.fdopen(write_end, "wb"), left, right, \
            open(path, "rb") as file, open(os.devnull, "rb") as null, left.makefile("rb") as sock:
        assert waitable(pipe) and waitable(sock)
        assert not waitable(file) and not waitable(null) and not waitable(io.BytesIO(b""))

        assert [type(stdin_reader(s, None)) for s in (pipe, file)] == [MessageReader, StdinAsyncReader]


def test_a_descriptor_is_read_as_data_arrives_and_stays_blocking():
    """ReadableFd waits on the event loop, and leaves the descriptor blocking: the flag is shared with
    every copy of it, stdout too where stdin and stdout are one socket."""
    left, right = socket.socketpair()
    with left, right:
        reader = MessageReader(ReadableFd(left.fileno()))

        async def run():
            line = asyncio.ensure_future(reader.readline())
            await asyncio.sleep(0.01)
            assert not line.done()                   # nothing sent yet: waiting, not reading
            right.sendall(b"Content-Length: 2\r\n\r\nhi")
            got = [await line, await reader.readline(), await reader.readexactly(2)]
            right.shutdown(socket.SHUT_WR)
            return got + [await reader.readline()]
        assert asyncio.run(run()) == [b"Content-Length: 2\r\n", b"\r\n", b"hi", b""]
        assert os.get_blocking(left.fileno())
