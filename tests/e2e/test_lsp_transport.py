"""End-to-end: `spanfill serve --tcp HOST:PORT` speaks the same protocol over a socket, and
`spanfill serve` rejects a malformed address with a usable message."""
import asyncio
import json
import socket
import subprocess
import sys

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


EXIT_WHILE_LOADING = """
import sys, threading
from spanfill.server.lsp import server
from spanfill.server.scheduler import Scheduler
from spanfill.server import serve
stuck = threading.Event()
def loader(path, **kw):
    stuck.wait()                   # a model load that never ends
server.session.scheduler = Scheduler(loader=loader)
serve.main([])
"""


def test_the_server_exits_while_its_worker_is_stuck_in_a_model_load():
    """`exit` ends the process even while the engine's worker thread is busy (Python waited for the
    worker at exit: for a model load that takes minutes, or one that hangs, the server lingered)."""
    initialize = {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}}
    for messages, code in (([initialize, {"method": "initialized", "params": {}}, {"id": 2, "method": "shutdown"},
                             {"method": "exit"}], 0),
                           ([initialize, {"method": "initialized", "params": {}}], 0)):   # stdin closes: gone
        proc = subprocess.run([sys.executable, "-c", EXIT_WHILE_LOADING], input=framed(*messages),
                              capture_output=True, timeout=60, env=CONFIG.server_env)
        assert proc.returncode == code, proc.stderr[-2000:]
