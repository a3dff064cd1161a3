"""A raw JSON-RPC client for `spanfill serve` over stdio: LSP framing and nothing else.

pygls's client validates what it sends, and the randomised protocol test must send what a broken
or hostile client would (malformed JSON, invalid params, unknown methods), so this one writes
bytes. A reader thread collects every message the server sends, keyed by response id; requests
from the server (progress tokens, configuration) are answered with null.
"""
from __future__ import annotations

import itertools
import json
import subprocess
import threading
import time
from collections import defaultdict


def _key(msg_id):
    """Responses are filed by id; an id JSON-RPC does not allow (a list, an object) by its JSON."""
    return msg_id if msg_id is None or isinstance(msg_id, (int, str)) else json.dumps(msg_id)


class StdioClient:
    def __init__(self, argv: list[str], env: dict, stderr):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        self.responses: dict = defaultdict(list)      # id -> every response with that id (None: id null)
        self.notifications: list[dict] = []
        self._ids = itertools.count(1)
        self._write_lock = threading.Lock()
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="stdio-client-reader", daemon=True)
        self._reader.start()

    # -- sending ---------------------------------------------------------------------------------
    def send_body(self, body: bytes) -> None:
        with self._write_lock:
            self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        self.send_body(json.dumps(message).encode())

    def request(self, method: str, params, msg_id=None):
        msg_id = next(self._ids) if msg_id is None else msg_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def call(self, method: str, params, timeout: float = 60.0) -> dict:
        """Send a request and return its response."""
        msg_id = self.request(method, params)
        if not self.wait(lambda: msg_id in self.responses, timeout):
            raise TimeoutError(f"no response to {method} (id {msg_id}) within {timeout:g} s")
        return self.responses[msg_id][0]

    def wait(self, done, timeout: float) -> bool:
        """Wait until done() (checked whenever a message arrives) or the timeout; returns done()."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0 or not self._reader.is_alive():
                    return done()
                self._arrived.wait(min(left, 1.0))
            return True

    # -- receiving -------------------------------------------------------------------------------
    def _read(self) -> None:
        stream = self.proc.stdout
        while True:
            length = None
            while (header := stream.readline()) not in (b"\r\n", b""):
                name, _, value = header.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if header == b"" or length is None:
                break
            message = json.loads(stream.read(length))
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            with self._arrived:
                if "method" in message:
                    self.notifications.append(message)
                else:
                    self.responses[_key(message.get("id"))].append(message)
                self._arrived.notify_all()
        with self._arrived:
            self._arrived.notify_all()

    def close(self, timeout: float = 30.0) -> int | None:
        """Close stdin and return the exit code (killing the process if it does not exit)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
