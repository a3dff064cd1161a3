"""The protocol keeps no future past its handler: pygls files every coroutine or generator handler's
future under its message id and took out only those of answered requests, so each notification
(didChange: one per keystroke) left one behind for good."""
import asyncio
from concurrent.futures import Future

from lsprotocol import types

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


def test_a_notification_method_sent_with_an_id_is_refused_not_left_unanswered():
    """cattrs drops unknown keys: a didClose (or $/cancelRequest) carrying an id became a notification
    without one, handled as such, and the client waited for an answer to that id for good."""
    server = SpanfillServer()
    server.protocol._initialize_seen = True
    sent = []
    server.protocol._send_data = sent.append
    closed = []
    server.session.forget = closed.append
    deliver(server, {"jsonrpc": "2.0", "id": 7, "method": "textDocument/didClose",
                     "params": {"textDocument": {"uri": "file:///w/a.py"}}})
    deliver(server, {"jsonrpc": "2.0", "id": "c", "method": "$/cancelRequest", "params": {"id": 3}})
    assert [(m["id"], m["error"]["code"]) for m in sent] == [(7, -32600), ("c", -32600)]
    assert "textDocument/didClose is an LSP notification" in sent[0]["error"]["message"]
    assert closed == []                         # not handled as the notification


def test_a_document_change_sent_with_an_id_is_refused_and_the_document_forgotten():
    """Refused as a request, a didChange was not applied, yet the server kept the text before it and
    completed against text the client no longer had (an unreadable didChange's document is forgotten)."""
    server = SpanfillServer()
    server.protocol._initialize_seen = True
    sent, lost = [], []
    server.protocol._send_data = sent.append
    server.lost_document = lambda uri, method, detail: lost.append((uri, method))
    change = {"textDocument": {"uri": "file:///w/a.py", "version": 2}, "contentChanges": [{"text": "y = 2\n"}]}
    deliver(server, {"jsonrpc": "2.0", "id": 7, "method": "textDocument/didChange", "params": change})
    deliver(server, {"jsonrpc": "2.0", "id": None, "method": "textDocument/didOpen", "params": {"textDocument": {
        "uri": "file:///w/b.py", "languageId": "python", "version": 1, "text": "x = 1\n"}}})
    assert [(m["id"], m["error"]["code"]) for m in sent] == [(7, -32600), (None, -32600)]
    assert lost == [("file:///w/a.py", "textDocument/didChange"), ("file:///w/b.py", "textDocument/didOpen")]


def test_a_cancel_whose_id_is_no_integer_or_string_cancels_nothing():
    """`true` and 1.0 equal the dict key 1: a `$/cancelRequest` with either cancelled request 1."""
    server = SpanfillServer()
    server.protocol._initialize_seen = True
    running = Future()
    server.protocol._request_futures[1] = running
    for bad in (True, 1.0, None, [1]):
        deliver(server, {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": bad}})
    assert not running.cancelled()
    deliver(server, {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
    assert running.cancelled()


def test_spanfill_document_with_a_uri_that_is_no_string_is_invalid_params(monkeypatch):
    from spanfill.server.lsp import server               # the one with the features registered
    monkeypatch.setattr(server.protocol, "_initialize_seen", True)
    sent = []
    monkeypatch.setattr(server.protocol, "_send_data", sent.append)
    for i, params in enumerate(({"uri": [1]}, {"uri": {"a": 1}}, {})):
        deliver(server, {"jsonrpc": "2.0", "id": i, "method": "spanfill/document", "params": params})
    deliver(server, {"jsonrpc": "2.0", "id": 9, "method": "spanfill/document", "params": {"uri": "file:///nope.py"}})
    plain = [m if isinstance(m, dict) else server.protocol._converter.unstructure(m) for m in sent]
    codes = [(m["id"], m["error"]["code"] if "error" in m else "result") for m in plain]
    assert codes == [(0, -32602), (1, -32602), (2, -32602), (9, "result")], codes


async def test_a_field_of_the_wrong_json_type_is_invalid_not_converted(monkeypatch):
    """cattrs turns anything into a str or int field's type: a didOpen with "text": null opened the
    document "None", a didChange with "text": 5 typed "5", a line "3" was line 3."""
    from spanfill.server.lsp import server               # the one with the features registered
    monkeypatch.setattr(server.protocol, "_initialize_seen", True)
    sent = []
    monkeypatch.setattr(server.protocol, "_send_data", sent.append)
    uri = "file:///w/typed.py"
    item = {"uri": uri, "languageId": "python", "version": 1, "text": "x = 1\n"}
    try:
        for text in (None, 5, ["x"]):
            deliver(server, {"jsonrpc": "2.0", "method": "textDocument/didOpen",
                             "params": {"textDocument": {**item, "text": text}}})
        assert server.session.documents.get(uri) is None         # logged and dropped
        deliver(server, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}})
        change = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": 5}
        deliver(server, {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]}})
        await asyncio.sleep(0.05)                  # a generator handler's steps run on the loop
        assert server.session.documents.get(uri) is None      # not read: forgotten, its text is not the client's
        deliver(server, {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}})
        deliver(server, {"jsonrpc": "2.0", "id": 9, "method": "textDocument/inlineCompletion", "params": {
            "textDocument": {"uri": uri}, "position": {"line": "0", "character": True},
            "context": {"triggerKind": 1}}})
        plain = [m if isinstance(m, dict) else server.protocol._converter.unstructure(m) for m in sent]
        told = [m["params"]["message"] for m in plain if m.get("method") == "window/showMessage"]
        assert len(told) == 4 and all(uri in m for m in told)     # three didOpens and the didChange
        plain = [m for m in plain if "id" in m]
        assert [(m["id"], m["error"]["code"]) for m in plain] == [(9, -32602)]
        assert "should be an integer, but was a string" in plain[0]["error"]["message"]
        context = server.protocol.structure_message({"jsonrpc": "2.0", "id": 10, "method": "textDocument/completion",
                                                     "params": {"textDocument": {"uri": uri},
                                                                "position": {"line": 0, "character": 0},
                                                                "context": {"triggerKind": 9}}})
        assert "triggerKind" in context.detail() or "trigger_kind" in context.detail()   # an enum keeps its values
        ok = server.protocol.structure_message({"jsonrpc": "2.0", "id": 11, "method": "textDocument/completion",
                                                "params": {"textDocument": {"uri": uri},
                                                           "position": {"line": 0, "character": 0},
                                                           "context": {"triggerKind": 2}}})
        assert ok.params.context.trigger_kind is types.CompletionTriggerKind.TriggerCharacter
    finally:
        server.session.forget(uri)


def test_a_message_that_could_not_be_sent_is_logged_and_not_sent_about():
    """After the client closed the pipe (`exit` with a request pending) every send fails; pygls's default
    report told the client about each failure, which failed to send and was reported again, until
    Python's recursion limit (6.5 MB of tracebacks on stderr). The report is tried once, and its own
    failure is logged."""
    server = SpanfillServer()
    writes = []

    class Closed:
        def write(self, data):
            writes.append(data)
            raise ValueError("write to closed file")

        def close(self):
            pass

    server.protocol.set_writer(Closed())
    server.protocol._initialize_seen = True
    server.window_log_message(types.LogMessageParams(type=types.MessageType.Info, message="hello"))
    assert len(writes) == 2 and b"window/showMessage" in writes[1]


def test_an_object_with_a_jsonrpc_key_inside_params_is_a_value_not_a_message():
    """The JSON hook sees every object, innermost first: one inside params with a "jsonrpc" key (a
    document's metadata, a command's argument) was read as a message, and the request answered with an
    internal error. Only an object with a method, an id, a result or an error is one."""
    server = SpanfillServer()
    inner = {"jsonrpc": "2.0", "note": "metadata"}
    assert server.protocol.structure_message(dict(inner)) == inner
    assert not isinstance(server.protocol.structure_message({"jsonrpc": "2.0", "id": 1, "method": "shutdown"}), dict)
