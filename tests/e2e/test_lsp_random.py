"""End-to-end: a seeded randomised client, as careless as a real one can be, against the real
`spanfill serve` over stdio.

A few hundred operations: opens of ordinary, CRLF, emoji, 1 MB single-line and control-character
documents; incremental edits, some with ranges past the end; inline-completion and completion
requests at valid, past-the-end and negative positions, a third of them cancelled; closes; invalid
settings; notifications with invalid params; malformed JSON bodies; unknown methods. Then:

* the process is alive and still serving, and exits cleanly on shutdown/exit;
* every request got exactly one response, of the kind its params call for (a result, InvalidParams,
  MethodNotFound, RequestCancelled only if cancelled), and every malformed body a ParseError or
  InvalidRequest with id null;
* every range the server returned lies inside the client's copy of the document when it asked;
* the server's text of every open document (`spanfill/document`) equals the client's.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import os
import random
import re
import time
from dataclasses import dataclass

import pytest

from spanfill.engine.testing import SAMPLE_CODE

from lsp_helpers import SERVE, options
from stdio_client import StdioClient

SEED = int(os.environ.get("SPANFILL_RANDOM_SEED", 22))     # another seed: another run, as reproducible
OPERATIONS = 800
DRAIN_TIMEOUT_S = 120      # a bound on waiting, not a latency requirement

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
REQUEST_CANCELLED = -32800
INLINE, COMPLETION = "textDocument/inlineCompletion", "textDocument/completion"

BREAK = re.compile(r"\r\n|\r|\n")
DOCUMENTS = {
    "ordinary": SAMPLE_CODE,
    "crlf": SAMPLE_CODE.replace("\n", "\r\n"),
    "emoji": 'names = ["😀", "𝔘𝔫𝔦", "é", "中文"]\n\n\ndef greet(who="🐍"):\n    return f"hi {who} 👋"\n',
    "long-line": "data = '" + "ab😀c" * 200_000 + "'\n",
    "control": "a = 1\x00\x07\x0c\nb = '\x1b[0m'\u2028c = 2\rd = '\x85\u2029'\r\n\x0b\tend",
    "empty": "",
}
TYPED = ["x", "return ", "\n", "\r\n", "    ", "😀", "é", "\x0c", "\u2028", "(a, b)", "", "\n\n# note\n"]
MALFORMED = [        # (body, expected error code); each is answered with id null
    (b'{"jsonrpc": "2.0", "id": 1, "method": "spanfill/status", "params": {', PARSE_ERROR),
    (b"\xff\xfe{}", PARSE_ERROR),
    (b"not json at all", PARSE_ERROR),
    (b"[" * 100_000, PARSE_ERROR),
    (b"[]", INVALID_REQUEST),
    (b"42", INVALID_REQUEST),
    (b'[{"jsonrpc": "2.0", "id": "batched", "method": "spanfill/status"}]', INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "spanfill/status"}', INVALID_REQUEST),
]
BAD_SETTINGS = [{"spanfill": {"steps": -3, "device": "tpu", "spanLength": "long"}}, 42, None, ["spanfill"],
                {"spanfill": {"candidates": 10**9, "enable": "yes", "debounceMs": -1, "rule": 7}}]


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class ClientDoc:
    """The client's copy of a document, read as LSP reads positions: lines end only at \\n, \\r\\n
    or \\r; columns count UTF-16 units; a column past a line's end is that end, a line past the
    last is the end of the text (as VS Code's validatePosition clamps)."""

    def __init__(self, uri: str, text: str):
        self.uri, self.text, self.version = uri, text, 1

    def _starts(self) -> list[int]:
        return [0] + [m.end() for m in BREAK.finditer(self.text)]

    def _line(self, starts: list[int], line: int) -> str:
        end = starts[line + 1] if line + 1 < len(starts) else len(self.text)
        return self.text[starts[line]:end].rstrip("\r\n")

    def position(self, offset: int) -> dict:
        starts = self._starts()
        line = bisect.bisect_right(starts, offset) - 1
        return {"line": line, "character": utf16_len(self.text[starts[line]:offset])}

    def offset(self, pos: dict) -> int:
        starts = self._starts()
        if pos["line"] >= len(starts):
            return len(self.text)
        head = self._line(starts, pos["line"]).encode("utf-16-le", "surrogatepass")[:2 * pos["character"]]
        return starts[pos["line"]] + len(head.decode("utf-16-le", "ignore"))

    def inside(self, pos: dict) -> bool:
        """A position naming a place in the text: an existing line, a column on a character boundary."""
        starts = self._starts()
        if not (0 <= pos["line"] < len(starts) and pos["character"] >= 0):
            return False
        units = self._line(starts, pos["line"]).encode("utf-16-le", "surrogatepass")
        try:
            units[:2 * pos["character"]].decode("utf-16-le")
        except UnicodeDecodeError:
            return False                     # between the halves of a surrogate pair
        return pos["character"] <= len(units) // 2

    def apply(self, change: dict) -> None:
        if "range" not in change:
            self.text = change["text"]
            return
        start = self.offset(change["range"]["start"])
        end = max(start, self.offset(change["range"]["end"]))
        self.text = self.text[:start] + change["text"] + self.text[end:]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Sent:
    method: str
    expect: int | None               # the error code its params call for; None: a result
    text: str | None = None          # the document as the client had it when asking
    cancelled: bool = False


class RandomClient:
    """What the test sends and what it expects, from one seeded generator."""

    def __init__(self, client: StdioClient, seed: int):
        self.client, self.rng = client, random.Random(seed)
        self.docs: dict[str, ClientDoc] = {}
        self.closed: set[str] = set()
        self.sent: dict = {}
        self.to_cancel: list = []
        self.null_id_codes: list[int] = []
        self.uris = 0

    # -- positions -----------------------------------------------------------------------------
    def some_offset(self, doc: ClientDoc, at_most: int | None = None) -> int:
        offset = min(self.rng.randint(0, len(doc.text)), len(doc.text) if at_most is None else at_most)
        if 0 < offset < len(doc.text) and doc.text[offset - 1:offset + 1] == "\r\n":
            offset -= 1                      # no LSP position lies between \r and \n
        return offset

    def past_the_end(self, doc: ClientDoc) -> dict:
        pos = doc.position(len(doc.text))
        if self.rng.random() < 0.5:
            return {"line": pos["line"] + self.rng.randint(1, 50), "character": self.rng.randint(0, 10)}
        return {"line": self.rng.randint(0, pos["line"]), "character": 10**6 + self.rng.randint(0, 10)}

    def negative(self) -> dict:
        return self.rng.choice([{"line": -1, "character": 0}, {"line": 0, "character": -5},
                                {"line": -(2**31), "character": -1}])

    # -- operations ----------------------------------------------------------------------------
    def open(self) -> None:
        kind = self.rng.choice(list(DOCUMENTS))
        if kind == "long-line" and sum(len(d.text) > 10**5 for d in self.docs.values()) >= 2:
            kind = "ordinary"
        self.uris += 1
        uri = f"file:///random/{self.uris}-{kind}.py"
        self.docs[uri] = ClientDoc(uri, DOCUMENTS[kind])
        self.client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": DOCUMENTS[kind]}})

    def change(self, doc: ClientDoc) -> None:
        changes = []
        for _ in range(self.rng.randint(1, 3)):
            if self.rng.random() < 0.03:
                change = {"text": self.rng.choice(list(DOCUMENTS.values()))}
            else:
                a = self.some_offset(doc)
                b = max(a, self.some_offset(doc, at_most=a + 200))
                start, end = doc.position(a), doc.position(b)
                if self.rng.random() < 0.15:
                    end = self.past_the_end(doc)
                    if self.rng.random() < 0.5:
                        start = end
                change = {"range": {"start": start, "end": end}, "text": self.rng.choice(TYPED)}
            doc.apply(change)
            changes.append(change)
        doc.version += 1
        self.client.notify("textDocument/didChange", {
            "textDocument": {"uri": doc.uri, "version": doc.version}, "contentChanges": changes})

    def bad_notification(self, doc: ClientDoc) -> None:
        """Invalid params: the server drops the whole notification; a didChange or didOpen that it
        cannot read leaves it without the client's text, so it forgets that document."""
        bad_range = {"start": self.negative(), "end": {"line": 0, "character": 0}}
        method, params = self.rng.choice([
            ("textDocument/didChange", {"textDocument": {"uri": doc.uri, "version": doc.version + 1},
                                        "contentChanges": [{"range": bad_range, "text": "lost"}]}),
            ("textDocument/didOpen", {"textDocument": {"uri": doc.uri}}),
            ("textDocument/didClose", {}),
            ("$/cancelRequest", {"id": [1, 2]}),
            ("spanfill/noSuchNotification", {"x": 1}),
        ])
        self.client.notify(method, params)
        if method in ("textDocument/didChange", "textDocument/didOpen"):
            del self.docs[doc.uri]
            self.closed.add(doc.uri)

    def ask(self, method: str, uri: str, doc: ClientDoc | None) -> None:
        roll = self.rng.random()
        if roll < 0.15:
            position, expect = self.negative(), INVALID_PARAMS
        elif doc is None:                    # a document never opened, or closed: an empty answer
            position, expect = {"line": 0, "character": 0}, None
        elif roll < 0.3:
            position, expect = self.past_the_end(doc), None
        else:
            position, expect = doc.position(self.some_offset(doc)), None
        params = {"textDocument": {"uri": uri}, "position": position}
        if method == INLINE:
            params["context"] = {"triggerKind": self.rng.choice([1, 2])}
        self.track(method, params, expect, doc.text if doc else None)

    def track(self, method: str, params, expect: int | None, text: str | None = None) -> None:
        msg_id = self.client.request(method, params)
        self.sent[msg_id] = Sent(method, expect, text)
        if self.rng.random() < 1 / 3:
            self.to_cancel.append((msg_id, self.rng.randint(0, 3)))

    def send_cancellations(self) -> None:
        """Cancel the requests whose turn has come (each waits 0-3 operations after it was sent)."""
        due = [(i, n - 1) for i, n in self.to_cancel]
        self.to_cancel = [(i, n) for i, n in due if n >= 0]
        for msg_id, n in due:
            if n < 0:
                self.sent[msg_id].cancelled = True
                self.client.notify("$/cancelRequest", {"id": msg_id})

    def cancel_the_rest(self) -> None:
        while self.to_cancel:
            self.send_cancellations()

    def step(self) -> None:
        rng, docs = self.rng, self.docs
        doc = docs[rng.choice(list(docs))] if docs else None
        roll = rng.random()
        if doc is None or roll < 0.08:
            self.open()
        elif roll < 0.38:
            self.change(doc)
        elif roll < 0.63:
            self.ask(INLINE, doc.uri, doc)
        elif roll < 0.71:
            self.ask(COMPLETION, doc.uri, doc)
        elif roll < 0.74:
            gone = rng.choice(sorted(self.closed)) if self.closed else "file:///random/never-opened.py"
            self.ask(rng.choice([INLINE, COMPLETION]), gone, None)
        elif roll < 0.79:
            del docs[doc.uri]
            self.closed.add(doc.uri)
            self.client.notify("textDocument/didClose", {"textDocument": {"uri": doc.uri}})
        elif roll < 0.82:
            self.client.notify("workspace/didChangeConfiguration", {"settings": rng.choice(BAD_SETTINGS)})
        elif roll < 0.86:
            body, code = rng.choice(MALFORMED)
            self.client.send_body(body)
            self.null_id_codes.append(code)
        elif roll < 0.89:
            self.track(rng.choice(["spanfill/noSuchMethod", "textDocument/hover", "$/noSuchRequest"]),
                       {"x": 1}, METHOD_NOT_FOUND)
        elif roll < 0.93:
            self.bad_notification(doc)
        else:
            self.track("spanfill/status", {}, None)
        self.send_cancellations()


def check_response(msg_id, sent: Sent, response: dict) -> str | None:
    """What is wrong with this response to this request, if anything."""
    error = response.get("error")
    if error is not None:
        allowed = {sent.expect} | ({REQUEST_CANCELLED} if sent.cancelled and sent.expect is None else set())
        if error["code"] not in allowed:
            return f"request {msg_id} ({sent.method}, expected {sent.expect or 'a result'}) got error {error}"
        return None
    if sent.expect is not None:
        return f"request {msg_id} ({sent.method}) should have failed with {sent.expect}, got {response}"
    if sent.method in (INLINE, COMPLETION) and sent.text is not None:
        doc = ClientDoc("", sent.text)
        items = response["result"]["items"]
        ranges = [i["range"] if sent.method == INLINE else i["textEdit"]["range"] for i in items]
        for r in ranges:
            if not (doc.inside(r["start"]) and doc.inside(r["end"]) and doc.offset(r["start"]) <= doc.offset(r["end"])):
                return f"request {msg_id} ({sent.method}) returned range {r}, outside the client's document"
    return None


@pytest.fixture
def server(tmp_path):
    log = tmp_path / "server.log"
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        client = StdioClient([*SERVE, "--log-file", str(log)], {**os.environ, "OMP_NUM_THREADS": "1"}, stderr)
        yield client
        client.close()
    print(f"server log: {log}")


def initialize(server: StdioClient, model) -> None:
    init = server.call("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                      "initializationOptions": options(model, completionFallback=True, threads=1)})
    assert "result" in init
    server.notify("initialized", {})
    for _ in range(1200):
        if (state := server.call("spanfill/status", {})["result"]["state"]) in ("ready", "failed"):
            break
        time.sleep(0.1)
    assert state == "ready"


def assert_every_request_answered_once(server: StdioClient, run: RandomClient) -> None:
    unanswered = [f"{i} {s.method}{' (cancelled)' if s.cancelled else ''}" for i, s in run.sent.items()
                  if i not in server.responses]
    assert not unanswered, f"seed {SEED}: {len(unanswered)} of {len(run.sent)} requests never answered: {unanswered}"
    twice = [i for i in run.sent if len(server.responses[i]) > 1]
    assert not twice, f"seed {SEED}: answered more than once: {twice}"
    problems = [p for i, s in run.sent.items() if (p := check_response(i, s, server.responses[i][0]))]
    assert not problems, f"seed {SEED}:\n" + "\n".join(problems)
    null_id = sorted(r["error"]["code"] for r in server.responses[None])
    assert null_id == sorted(run.null_id_codes), f"seed {SEED}: responses with id null {null_id}"


def assert_documents_in_step(server: StdioClient, run: RandomClient) -> None:
    for uri, doc in run.docs.items():
        served = server.call("spanfill/document", {"uri": uri})["result"]
        assert served is not None, f"{uri} is open in the client but not in the server"
        assert (served["sha256"], served["length"]) == (digest(doc.text), len(doc.text)), \
            f"seed {SEED}: {uri}: the server's text differs from the client's"
    for uri in run.closed - run.docs.keys():
        assert server.call("spanfill/document", {"uri": uri})["result"] is None
    resources = server.call("spanfill/status", {})["result"]["resources"]
    assert resources["openDocuments"] == len(run.docs)          # closed documents are let go
    assert resources["typingCache"] <= len(run.docs) and resources["contextWindows"] <= len(run.docs)


def test_every_request_is_answered_and_documents_stay_in_step(server: StdioClient, tiny_model):
    initialize(server, tiny_model)
    run = RandomClient(server, SEED)
    for _ in range(OPERATIONS):
        run.step()
    run.cancel_the_rest()
    server.wait(lambda: all(i in server.responses for i in run.sent)
                and len(server.responses[None]) >= len(run.null_id_codes), DRAIN_TIMEOUT_S)
    assert server.proc.poll() is None, "the server exited"
    server.call("spanfill/status", {})           # anything still queued before this is in by now
    assert_every_request_answered_once(server, run)
    assert_documents_in_step(server, run)

    run.open()
    last = list(run.docs.values())[-1]          # the one just opened
    answer = server.call(INLINE, {"textDocument": {"uri": last.uri}, "position": last.position(0),
                                  "context": {"triggerKind": 1}})
    assert "items" in answer["result"]           # still serving
    assert "result" in server.call("shutdown", None)
    after = server.call("spanfill/status", {})
    assert after["error"]["code"] == INVALID_REQUEST     # LSP: requests after shutdown are refused
    server.notify("exit", None)
    assert server.proc.wait(30) == 0


def test_a_reply_that_does_not_deserialize_fails_the_request_awaiting_it(server: StdioClient):
    """The client answers every server request with null: for workspace/configuration (a list in
    LSP) that does not deserialize, and the settings pull must end with a warning, not wait forever."""
    assert "result" in server.call("initialize", {"processId": None, "rootUri": None,
                                                  "capabilities": {"workspace": {"configuration": True}}})
    server.notify("workspace/didChangeConfiguration", {"settings": None})
    assert server.wait(lambda: any(n["method"] == "window/showMessage" and "workspace/configuration"
                                   in n["params"]["message"] for n in server.notifications), 60)
    assert "result" in server.call("spanfill/status", {})


def test_requests_before_initialize_are_refused_and_notifications_dropped(server: StdioClient, tiny_model):
    """LSP: before `initialize` a request is answered ServerNotInitialized (-32002) and a notification
    is dropped; `initialize` itself is served, and everything after it as usual."""
    early = server.call("spanfill/status", {})
    assert early["error"]["code"] == -32002 and "before initialize" in early["error"]["message"]
    uri = "file:///early.py"
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": "x = 1\n"}})
    initialize(server, tiny_model)
    assert "result" in server.call("spanfill/status", {})
    assert server.call("spanfill/document", {"uri": uri})["result"] is None     # the early didOpen was dropped


def test_a_change_the_server_cannot_read_forgets_the_document_until_it_is_opened_again(server: StdioClient, tiny_model):
    """A didChange with one readable and one unreadable change (a negative position): the client's
    text now differs from any the server could make, so the server forgets the document, says so, and
    answers completions there with nothing rather than for other text; opening it again restores it."""
    initialize(server, tiny_model)
    uri, text = "file:///lost.py", "def add(a, b):\n    return a\n"
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                             "text": text}})
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 1, "character": 12}, "end": {"line": 1, "character": 12}}, "text": " + b"},
        {"range": {"start": {"line": 0, "character": -1}, "end": {"line": 0, "character": 0}}, "text": ""}]})
    assert server.call("spanfill/document", {"uri": uri})["result"] is None
    warned = [n for n in server.notifications if n["method"] == "window/showMessage" and uri in n["params"]["message"]]
    assert len(warned) == 1 and "opened again" in warned[0]["params"]["message"]
    answer = server.call(INLINE, {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 16},
                                  "context": {"triggerKind": 1}})
    assert answer["result"]["items"] == []
    server.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [
        {"range": {"start": {"line": 0, "character": -1}, "end": {"line": 0, "character": 0}}, "text": ""}]})
    server.call("spanfill/status", {})
    assert len([n for n in server.notifications if n["method"] == "window/showMessage"
                and uri in n["params"]["message"]]) == 1          # told once
    assert not [n for n in server.notifications if n["method"] == "window/logMessage"
                and uri in n["params"]["message"] and "not open" in n["params"]["message"]]   # nor at every key
    changed = text.replace("return a", "return a + b")
    server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 4,
                                                             "text": changed}})
    served = server.call("spanfill/document", {"uri": uri})["result"]
    assert (served["sha256"], served["length"]) == (digest(changed), len(changed))
