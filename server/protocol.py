"""The JSON-RPC layer under the language server: pygls's LSP protocol without its document store,
and with one answer to every request.

pygls 2.1.1 turns each body into a message inside `json.loads` (the object hook
`structure_message`) and, when that raises, its reader only logs: a request whose params fail to
deserialize (a negative position), a body that is not JSON, or JSON that is not a JSON-RPC message
got no response at all, and a client waits for it forever. Here:

  params that do not deserialize        InvalidParams (MethodNotFound first, if nothing serves it)
  a body that is not JSON               ParseError, id null (from the server's error handler)
  JSON that is not a request object     InvalidRequest (an array: LSP has no batches; a number;
                                        an object without "jsonrpc"; an id that is no int/string)
  a request before `initialize`         ServerNotInitialized (LSP; a notification then is dropped,
                                        `exit` excepted)
  a request after `shutdown`            InvalidRequest (LSP)
  a notification's method with an id   InvalidRequest (`exit` excepted: it exits)
  a notification with invalid params    logged and dropped; a didOpen or didChange's document is
                                        forgotten until opened again (its text is no longer the client's)
  a string, integer or boolean field    invalid when the JSON holds another type (cattrs would make
  holding another type                  `"text": null` the text "None", `"line": "3"` line 3)
  a reply to our request that does not deserialize   fails the request waiting for it

Cancellation stays pygls's: `$/cancelRequest` cancels the handler's task, which answers
RequestCancelled unless the result was sent first.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Union

import cattrs
from lsprotocol import types
from pygls.exceptions import (JsonRpcException, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcServerNotInitialized,
                              JsonRpcMethodNotFound, JsonRpcParseError)
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.json_rpc import RPCError, RPCNotification, RPCRequest, RPCResponse

log = logging.getLogger(__name__)

JSONRPC = "2.0"
MESSAGE_KEYS = {"method", "id", "result", "error"}    # a JSON-RPC message has one of these beside "jsonrpc"


@dataclass(frozen=True)
class Unreadable:
    """A JSON-RPC message whose params (or result) did not deserialize, kept for an answer."""
    data: dict
    error: JsonRpcException

    def detail(self) -> str:
        """What was wrong, field by field ("... should be in range [0:2147483647], but was -1 @ $.params.position")."""
        cause = self.error.__cause__
        if isinstance(cause, cattrs.BaseValidationError):
            return "; ".join(cattrs.transform_error(cause, format_exception=lambda exc, _: str(exc)))
        return str(cause or self.error)


def valid_id(msg_id: Any) -> bool:
    return isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool)


def is_notification(method: Any) -> bool:
    """An LSP notification's method (lsprotocol gives it no response type)."""
    entry = types.METHOD_TO_TYPES.get(method) if isinstance(method, str) else None
    return entry is not None and entry[1] is None


JSON_TYPES = {type(None): "null", bool: "a boolean", int: "an integer", float: "a number", str: "a string",
              list: "an array", dict: "an object"}


def strict(kind: type):
    """A cattrs structure hook that takes `kind` as it is in JSON, and raises for any other type. It
    serves `kind`'s subclasses too (an IntEnum, a str Enum): those are made by their class, which
    refuses a value it does not have, as cattrs' own enum hook did."""
    def structure(value, cl):
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise TypeError(f"should be {JSON_TYPES[kind]}, but was {JSON_TYPES.get(type(value), 'another type')}")
        return value if cl is kind else cl(value)
    return structure


def strict_id(value, cl):
    """The structure hook of an `int | str` field (a request id, a progress token)."""
    if not valid_id(value):
        raise TypeError(f"should be an integer or a string, but was {JSON_TYPES.get(type(value), 'another type')}")
    return value


class FutureTable(dict):
    """pygls's table of handler futures, whose `items()` is a snapshot: pygls's shutdown cancels
    every future while iterating over the table, and a cancelled future's done callback
    (`_forget_future`) takes it out of the table at once."""

    def items(self):
        return list(super().items())


class SpanfillProtocol(LanguageServerProtocol):
    """pygls's LSP protocol without its document store, answering every request (module docstring)."""

    # -- documents: the session keeps them ---------------------------------------------------
    # pygls's protocol keeps a copy of every open document; the session keeps them with LSP line
    # semantics and C-speed column conversion (documents.py), so pygls need not keep a second one.
    def _user_handler_only(self, method: str, params):
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params):
        yield from self._user_handler_only(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params):
        yield from self._user_handler_only(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params):
        yield from self._user_handler_only(types.TEXT_DOCUMENT_DID_CLOSE, params)

    # -- no future kept past its handler -----------------------------------------------------
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._request_futures = FutureTable(self._request_futures)
        for kind in (str, int, bool):
            self._converter.register_structure_hook(kind, strict(kind))
        # a request id, a progress token: an integer or a string (cattrs let `true` through, and
        # `$/cancelRequest` with id true cancelled request 1, the dict key it equals)
        self._converter.register_structure_hook(Union[int, str], strict_id)
        self._initialize_seen = False

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None):
        """pygls files the future of every coroutine or generator handler under its message id,
        so `$/cancelRequest` can find it, and takes it out only when it answers a request: the
        futures of notifications (didChange is a generator handler) and of a generator's steps
        stayed for good, about a kilobyte per keystroke. Each is taken out once done."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        if (future := self._request_futures.get(msg_id)) is not None:
            future.add_done_callback(lambda _: self._forget_future(msg_id, future))

    def _forget_future(self, msg_id, future) -> None:
        if self._request_futures.get(msg_id) is future:    # not a later request that reused the id
            del self._request_futures[msg_id]

    # -- every request answered --------------------------------------------------------------
    def structure_message(self, data: dict):
        """`json.loads`'s object hook, called for every object of a body, innermost first; the one
        with "jsonrpc" is the message. One that does not deserialize comes back as `Unreadable`
        for `handle_message` to answer, instead of raising out of the reader unanswered."""
        if "jsonrpc" not in data or not MESSAGE_KEYS & data.keys():
            return data               # a message has a method, an id, a result or an error; this is a value in one
        if "method" in data and "params" not in data:
            data = {**data, "params": None}    # JSON-RPC lets params be omitted; pygls's generic types do not
        if "id" in data and (method := data.get("method")) != types.EXIT and is_notification(method):
            return Unreadable(data, JsonRpcInvalidRequest(
                f"invalid request: {method} is an LSP notification, sent here with an id (a notification has "
                f"none, and gets no response)"))     # structured, it would lose its id and go unanswered
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            return Unreadable(data, error)

    def handle_message(self, message) -> None:
        try:
            if isinstance(message, Unreadable):
                self._answer_unreadable(message)
            elif not isinstance(message, (RPCRequest, RPCNotification, RPCResponse, RPCError)):
                self._refuse(message.get("id") if isinstance(message, dict) else None, JsonRpcInvalidRequest(
                    f"not a JSON-RPC {JSONRPC} message (LSP sends one object per message, with \"jsonrpc\", "
                    f"\"id\" and \"method\"): {str(message)[:80]}"))
            elif isinstance(message, RPCRequest) and (refusal := self._refusal(message.id, message.method,
                                                                                message.jsonrpc)):
                self._refuse(message.id, refusal)
            elif (isinstance(message, RPCNotification) and not isinstance(message, RPCRequest)   # a request has both shapes
                  and not self._initialize_seen and message.method != types.EXIT):
                log.warning("dropped notification %r: it came before initialize", message.method)
            else:
                if isinstance(message, RPCRequest) and message.method == types.INITIALIZE:
                    self._initialize_seen = True
                super().handle_message(message)
        except Exception:     # a handler's own errors are answered by pygls; this is anything else
            log.exception("could not handle message %s", str(message)[:200])

    def _refusal(self, msg_id, method, jsonrpc) -> JsonRpcException | None:
        """Why a request may not be handled here, if it may not: JSON-RPC's and LSP's rules."""
        if not valid_id(msg_id):
            problem = f"its id {msg_id!r} is not an integer or a string"
        elif not isinstance(method, str):
            problem = f"its method {method!r} is not a string"
        elif jsonrpc != JSONRPC:
            problem = f'its "jsonrpc" is {jsonrpc!r}, not {JSONRPC!r}'
        elif self._shutdown and method != types.EXIT:
            problem = "the server is shutting down (shutdown was requested); only exit is accepted"
        elif method == types.INITIALIZE and self._initialize_seen:
            # a second one would renegotiate the position encoding under the open documents
            problem = "initialize was already received (LSP: once per connection)"
        elif not self._initialize_seen and method != types.INITIALIZE:
            return JsonRpcServerNotInitialized(f"{JsonRpcServerNotInitialized.MESSAGE}: {method} came before "
                                               f"initialize; send initialize first (LSP)")
        elif method not in self.fm.builtin_features and method not in self.fm.features:
            return JsonRpcMethodNotFound.of(method)
        else:
            return None
        return JsonRpcInvalidRequest(f"invalid request: {problem}")

    def _answer_unreadable(self, message: Unreadable) -> None:
        data, method, msg_id = message.data, message.data.get("method"), message.data.get("id")
        if method is None:                   # a response to one of our requests
            if valid_id(msg_id) and msg_id in self._request_futures:
                self._handle_response(msg_id, None, types.ResponseError(message.error.code, message.detail()))
            else:
                log.warning("dropped a malformed response: %s", message.detail())
        elif "id" not in data:
            log.warning("dropped notification %r with invalid params: %s", method, message.detail())
        elif isinstance(message.error, JsonRpcInvalidRequest):
            self._refuse(msg_id, message.error)
        elif refusal := self._refusal(msg_id, method, data.get("jsonrpc")):
            self._refuse(msg_id, refusal)
        else:
            log.warning("refused %s request %r: invalid params: %s", method, msg_id, message.detail())
            self._refuse(msg_id, JsonRpcInvalidParams(f"invalid params for {method}: {message.detail()}"))
        # a didOpen or didChange not applied (its params unreadable, or sent with an id: refused above)
        if method in (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE) and self._initialize_seen:
            self._lost_document(data.get("params"), method, message.detail())

    def _lost_document(self, params, method: str, detail: str) -> None:
        """A didOpen or didChange that could not be read: the client's text of that document is now
        one the server does not have, so the server forgets it (completions there answer nothing, rather
        than answer for other text, until the client opens it again) and tells the user."""
        document = params.get("textDocument") if isinstance(params, dict) else None
        uri = document.get("uri") if isinstance(document, dict) else None
        if isinstance(uri, str) and (lost := getattr(self._server, "lost_document", None)) is not None:
            lost(uri, method, detail)

    def refuse_unparsable(self, error: Exception) -> None:
        """Answer a body that is not JSON (JSON-RPC: a parse error, id null)."""
        log.warning("answered a message that is not JSON with a parse error: %s", error)
        self._refuse(None, JsonRpcParseError(f"the message is not valid JSON: {type(error).__name__}: {error}"))

    def _refuse(self, msg_id, error: JsonRpcException) -> None:
        """Answer with an error; "id": null where the request's id could not be read (JSON-RPC).
        Written as a plain object: lsprotocol's ResponseErrorMessage leaves out an id of None."""
        self._send_data({"jsonrpc": JSONRPC, "id": msg_id if valid_id(msg_id) else None,
                         "error": self._converter.unstructure(error.to_response_error())})
