"""End-to-end: `spanfill serve --tcp HOST:PORT` speaks the same protocol over a socket, and
`spanfill serve` rejects a malformed address with a usable message."""
import asyncio
import json
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_helpers import CONFIG, SERVE, capabilities, options


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_tcp_session(e2e_model):
    port = free_port()
    server = await asyncio.create_subprocess_exec(*SERVE, "--tcp", f"127.0.0.1:{port}", env=CONFIG.server_env,
                                                  stderr=asyncio.subprocess.DEVNULL)
    client = LanguageClient("tcp-test", "0")
    try:
        for _ in range(200):                       # the server imports torch before it listens
            try:
                await client.start_tcp("127.0.0.1", port)
                break
            except OSError:
                await asyncio.sleep(0.1)
        result = await asyncio.wait_for(client.initialize_async(types.InitializeParams(
            capabilities=capabilities(), initialization_options=options(e2e_model))), 30)
        assert result.capabilities.inline_completion_provider is not None
        client.initialized(types.InitializedParams())
        status = await client.protocol.send_request_async("spanfill/status", {})
        assert status.settings.device == "cpu"
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
        if server.returncode is None:
            server.terminate()
        await server.wait()


def test_bad_tcp_address_is_a_usage_error():
    for address in ("localhost", "127.0.0.1:99999"):          # no port; a port past 65535
        proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "serve", "--tcp", address],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "HOST:PORT" in proc.stderr and proc.stdout == "", proc.stderr


def test_invalid_cli_setting_is_reported():
    proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "serve", "--device", "tpu"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "device='tpu'" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "serve", "--threads", "0"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "threads=0" in proc.stderr


def framed(*messages: dict) -> bytes:
    bodies = [json.dumps({"jsonrpc": "2.0", **m}).encode() for m in messages]
    return b"".join(b"Content-Length: %d\r\n\r\n%s" % (len(b), b) for b in bodies)


def test_exit_before_shutdown_exits_with_1_and_after_it_with_0():
    """LSP: the server exits with 0 on `exit` after `shutdown`, with 1 on `exit` without it."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    for messages, code in (([initialize, {"method": "exit"}], 1),
                           ([initialize, {"id": 2, "method": "shutdown"}, {"method": "exit"}], 0)):
        proc = subprocess.run(SERVE, input=framed(*messages), capture_output=True, timeout=120)
        assert proc.returncode == code, proc.stderr[-2000:]


def test_a_header_claiming_a_huge_body_waits_for_it_rather_than_ending_the_server():
    """stdin: a buffered read of the claimed length allocated it first, so `Content-Length: 10**14`
    ended the server with a MemoryError (2**63: OverflowError). The body is awaited as it arrives; at
    the end of input the server ends as it does at any end of input."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    for claim in (10**14, 2**63):
        proc = subprocess.run(SERVE, input=framed(initialize) + b"Content-Length: %d\r\n\r\n" % claim,
                              capture_output=True, timeout=120, env=CONFIG.server_env)
        assert b"Error" not in proc.stderr and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert b'"id": 1' in proc.stdout and b'"result"' in proc.stdout     # initialize was answered


def test_headers_written_in_other_letters_or_spacing_are_read():
    """Header names are case-insensitive: one `content-length: N` (or `Content-Length:N`, or lines ended
    by \\n alone) was not matched; its body was read as the next header, and every later message was
    lost unanswered."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    bodies = [json.dumps({"jsonrpc": "2.0", **m}).encode()
              for m in (initialize, {"id": 2, "method": "shutdown"}, {"method": "exit"})]
    headers = (b"content-length: %d\r\n\r\n", b"Content-Length:%d \r\n\r\n", b"CONTENT-LENGTH: %d\n\n")
    stream = b"".join(header % len(body) + body for header, body in zip(headers, bodies))
    proc = subprocess.run(SERVE, input=stream, capture_output=True, timeout=120, env=CONFIG.server_env)
    assert proc.returncode == 0, proc.stderr[-2000:]             # exit after shutdown: both were read
    assert b'"id": 1' in proc.stdout and b'"id": 2' in proc.stdout


READER_FAILS = """
import sys, threading
from spanfill.server.lsp import server
from spanfill.server.scheduler import Scheduler
from spanfill.server import serve, streams
stuck = threading.Event()
server.session.scheduler = Scheduler(loader=lambda path, **kw: stuck.wait())   # a load that never ends
more = streams.MessageReader._more
async def failing(self):
    if not await more(self):
        raise OSError("stdin failed")
    return True
streams.MessageReader._more = failing
serve.main(sys.argv[1:])
"""


def test_the_server_exits_when_reading_its_input_fails_while_its_worker_is_stuck():
    """An error out of the reader skipped the exit that does not wait for the engine's worker: with a
    model load under way the process stayed after its input was gone."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    proc = subprocess.run([sys.executable, "-c", READER_FAILS],
                          input=framed(initialize, {"method": "initialized", "params": {}}),
                          capture_output=True, timeout=60, env=CONFIG.server_env)
    assert proc.returncode == 1 and b"stdin failed" in proc.stderr, proc.stderr[-2000:]


EXIT_WHILE_LOADING = """
import sys, threading
from spanfill.server.lsp import server
from spanfill.server.scheduler import Scheduler
from spanfill.server import serve
stuck = threading.Event()
def loader(path, **kw):
    stuck.wait()                   # a model load that never ends
server.session.scheduler = Scheduler(loader=loader)
serve.main(sys.argv[1:])
"""


def test_a_server_whose_input_is_a_file_reads_it_on_a_thread(tmp_path):
    """The event loop cannot wait on a file (epoll refuses one): stdin redirected from a file is read
    by pygls's threaded reader, to the end, with the same header handling."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    messages = framed(initialize, {"id": 2, "method": "shutdown"})
    path = tmp_path / "input"
    path.write_bytes(messages.replace(b"Content-Length: ", b"content-length:") + framed({"method": "exit"}))
    with open(path, "rb") as stdin:
        proc = subprocess.run(SERVE, stdin=stdin, capture_output=True, timeout=120, env=CONFIG.server_env)
    assert proc.returncode == 0, proc.stderr[-2000:]             # exit after shutdown: all three were read
    assert b'"id": 1' in proc.stdout and b'"id": 2' in proc.stdout


def test_the_server_exits_while_its_worker_is_stuck_in_a_model_load():
    """`exit` ends the process even while the engine's worker thread is busy (Python waited for the
    worker at exit: for a model load that takes minutes, or one that hangs, the server lingered)."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    for messages, code in (([initialize, {"method": "initialized", "params": {}}, {"id": 2, "method": "shutdown"},
                             {"method": "exit"}], 0),
                           ([initialize, {"method": "initialized", "params": {}}, {"method": "exit"}], 1),
                           ([initialize, {"method": "initialized", "params": {}}], 0)):   # stdin closes: gone
        proc = subprocess.run([sys.executable, "-c", EXIT_WHILE_LOADING], input=framed(*messages),
                              capture_output=True, timeout=60, env=CONFIG.server_env)
        assert proc.returncode == code, proc.stderr[-2000:]
        assert b"Traceback" not in proc.stderr, proc.stderr[-2000:]


def test_over_tcp_the_server_exits_while_its_worker_is_stuck_and_takes_one_client_at_a_time(tmp_path):
    """The same over TCP, where `exit` raised SystemExit through the event loop past the exit that does
    not wait for the worker (and a client gone without `exit`, a reset, left the server running); a
    second client while one is connected is turned away (every response went to the newest one)."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    for goodbye, code in (("exit", 0), ("exit without shutdown", 1), ("hang up", 0), ("reset", 0)):
        port = free_port()
        with open(tmp_path / "stderr", "w+b") as err:
            server = subprocess.Popen([sys.executable, "-c", EXIT_WHILE_LOADING, "--tcp", f"127.0.0.1:{port}"],
                                      env=CONFIG.server_env, stderr=err)
            try:
                client = RawClient(port)
                client.send(initialize)
                assert "result" in client.response(1)
                client.send({"method": "initialized", "params": {}})
                second = RawClient(port)
                assert second.sock.recv(1024) == b""          # closed without a word
                second.sock.close()
                client.send({"id": 2, "method": "spanfill/status", "params": {}})
                assert client.response(2)["result"]["state"] == "loading"     # the first client is still served
                if goodbye == "exit":
                    client.send({"id": 3, "method": "shutdown"})
                    client.response(3)
                if goodbye.startswith("exit"):
                    client.send({"method": "exit"})
                else:
                    if goodbye == "reset":          # an RST, not a FIN
                        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    client.sock.close()
                assert server.wait(timeout=60) == code, goodbye
            finally:
                if server.poll() is None:
                    server.kill()
                server.wait()
                err.seek(0)
                assert b"Traceback" not in err.read(), goodbye


ECHO_SERVER = """
import sys
sys.path.insert(0, sys.argv[3])
from fakes import FakeEngine
from spanfill.engine import CompletionResult
from spanfill.engine.core.tokenizer import Tokenizer
from spanfill.server import serve
from spanfill.server.lsp import server
from spanfill.server.scheduler import Scheduler

class Echo(FakeEngine):
    def complete(self, req):      # the line the request's cursor ends: which document it saw
        return CompletionResult([" # after " + req.prefix.rsplit("\\n", 1)[-1]] * req.n, 10, 0, 10, 1, [True] * req.n)

tok = Tokenizer.from_file(sys.argv[1])
server.session.scheduler = Scheduler(loader=lambda path, **kw: Echo(tok))
serve.main([] if sys.argv[2] == "stdio" else ["--tcp", sys.argv[2]])
"""


class RawClient:
    """LSP over a plain socket: writes several messages in one send, reads responses by id."""

    def __init__(self, port: int | None = None, sock: socket.socket | None = None):
        self.buffer, self.responses = b"", {}
        if sock is not None:                          # the server's stdin and stdout: the other end
            self.sock = sock
            return
        deadline = time.monotonic() + 60
        while True:                                   # the server imports torch before it listens
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)

    def send(self, *messages: dict) -> None:
        self.sock.sendall(framed(*messages))

    def response(self, msg_id: int) -> dict:
        while msg_id not in self.responses:
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0]) if sep else None
            if length is None or len(rest) < length:
                chunk = self.sock.recv(65536)
                assert chunk, "the server closed the connection"
                self.buffer += chunk
                continue
            message, self.buffer = json.loads(rest[:length]), rest[length:]
            if "id" in message and "method" not in message:
                self.responses[message["id"]] = message
        return self.responses.pop(msg_id)

    def shut_down(self, server: subprocess.Popen) -> int:
        """shutdown, then exit: the server's exit code."""
        self.send({"id": "bye", "method": "shutdown"})
        self.response("bye")
        self.send({"method": "exit"})
        return server.wait(timeout=60)


def reap(server: subprocess.Popen, client: RawClient) -> bytes:
    """The server ended (killed if it had not), the client's socket closed: what the server wrote to stderr."""
    if server.poll() is None:
        server.kill()
    server.wait()
    client.sock.close()
    with server.stderr:
        return server.stderr.read()


def echo_server(e2e_model, transport: str) -> tuple[subprocess.Popen, RawClient]:
    """The echo server over TCP, or over stdio with one socket as its stdin and stdout."""
    fakes = Path(__file__).parents[1] / "server"
    command = [sys.executable, "-c", ECHO_SERVER, str(e2e_model / "tokenizer.json")]
    if transport == "tcp":
        port = free_port()
        server = subprocess.Popen([*command, f"127.0.0.1:{port}", str(fakes)], env=CONFIG.server_env,
                                  stderr=subprocess.PIPE)
        return server, RawClient(port)
    ours, theirs = socket.socketpair()
    with theirs:
        server = subprocess.Popen([*command, "stdio", str(fakes)], stdin=theirs, stdout=theirs,
                                  env=CONFIG.server_env, stderr=subprocess.PIPE)
    ours.settimeout(30)
    return server, RawClient(sock=ours)


@pytest.mark.parametrize("transport", ["tcp", "stdio"])
def test_a_request_sees_the_document_as_it_was_sent_not_an_edit_sent_after_it(e2e_model, transport):
    """A didChange that arrives in the same chunk as the request before it must not move the document
    under that request: read from a buffer without the event loop taking a turn, the messages of a
    chunk would all be handled before the request's coroutine first ran (both transports read on the
    event loop)."""
    server, client = echo_server(e2e_model, transport)
    try:
        uri = "file:///t/notes.txt"
        client.send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None,
                                                                 "capabilities": {}}})
        assert "result" in client.response(1)
        client.send({"method": "initialized", "params": {}},
                    {"method": "textDocument/didOpen", "params": {"textDocument": {
                        "uri": uri, "languageId": "plaintext", "version": 1, "text": "alpha"}}})
        for msg_id in range(2, 600):
            client.send({"id": msg_id, "method": "spanfill/status", "params": {}})
            if client.response(msg_id)["result"]["state"] == "ready":
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the engine never became ready")
        def ask(msg_id: int, character: int) -> dict:
            return {"id": msg_id, "method": "textDocument/inlineCompletion", "params": {
                "textDocument": {"uri": uri}, "position": {"line": 0, "character": character},
                "context": {"triggerKind": 1}}}

        def edit(version: int, text: str) -> dict:
            return {"method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}}

        client.send(ask(1001, 5))                       # alone: the engine's text comes back
        assert [item["insertText"] for item in client.response(1001)["result"]["items"]] == [" # after alpha"]
        client.send(edit(2, "beta"))
        client.send(ask(1002, 4), edit(3, "omega"))     # one chunk: the request, then an edit
        # the request saw "beta"; by the time its answer was ready the text had moved, so it shows nothing
        # (a suggestion made for "omeg", the text after the edit, is what it answered before)
        assert client.response(1002)["result"]["items"] == []
        client.send({"id": 1003, "method": "spanfill/status", "params": {}})
        stats = client.response(1003)["result"]
        assert (stats["errors"], stats["requests"], stats["superseded"]) == (0, 2, 1), stats
        assert client.shut_down(server) == 0
    finally:
        reap(server, client)


def test_over_one_socket_as_stdin_and_stdout_responses_wait_for_a_client_that_reads_late(e2e_model):
    """Reading stdin on the event loop leaves the descriptor blocking: where stdin and stdout are one
    socket (socat, inetd, systemd), a non-blocking one would fail every response written while the
    client was not reading, and the framing after it would be lost."""
    server, client = echo_server(e2e_model, "stdio")
    try:
        client.send({"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None,
                                                                 "capabilities": {}}},
                    {"method": "initialized", "params": {}})
        ids = range(2, 402)        # ~400 status responses: more than a socket's buffers hold
        client.send(*({"id": i, "method": "spanfill/status", "params": {}} for i in ids))
        time.sleep(3)              # the client reads late: the server's writes wait for it
        assert "result" in client.response(1)
        assert all("result" in client.response(i) for i in ids)
        assert client.shut_down(server) == 0
    finally:
        assert b"Error sending data" not in reap(server, client)
