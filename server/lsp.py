"""The language server: one module-level pygls server and thin handlers that delegate to the
session (state), `completion` (the pipeline) and `settings` (validation).

Protocol surface:
  textDocument/inlineCompletion      ghost text; Invoked -> several candidates, Automatic -> one
  textDocument/completion            fallback items (single line), only with completionFallback
  spanfill/status (request)          model, device, dtype, cache hit rate, latency percentiles,
                                     resources (RSS, open documents, per-document caches), ...
  spanfill/document (request, params {"uri": ...})   the server's copy of an open document:
                                     {uri, version, length (code points), sha256 (of its UTF-8)},
                                     or null; for checking that a client's edits landed as meant
  spanfill/accepted, spanfill/rejected (notifications, params {"id": ...})   feedback statistics;
                                     the id is `command.arguments[0]` of the item shown;
                                     `command.arguments[1]` is {"source": "engine" | "cache"};
                                     an id that is not a string is logged and ignored
  workspace/executeCommand spanfill.accept   what accepting an item runs (VS Code forwards it);
                                     InvalidParams unless its first argument is a string

Every request is answered exactly once, malformed ones included (protocol.py says how).
"""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import itertools
import json
import logging
import sys
import threading
from typing import BinaryIO

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer

from . import completion
from .client_log import ClientLogHandler
from .protocol import SpanfillProtocol
from .scheduler import LoadSuperseded
from .session import Session
from .settings import SECTION, Settings, apply_settings
from .streams import MessageReader, stdin_reader

log = logging.getLogger(__name__)

STATUS = "spanfill/status"
DOCUMENT = "spanfill/document"
ACCEPTED = "spanfill/accepted"
REJECTED = "spanfill/rejected"
ACCEPT_COMMAND = "spanfill.accept"
PROGRESS_CREATE_TIMEOUT_S = 5.0     # a client that offers progress answers its create at once


class SpanfillServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("spanfill", "0.1.0", protocol_cls=SpanfillProtocol)
        self.session = Session()
        self._progress_ids = itertools.count(1)
        self._loaded: Settings | None = None       # the settings the serving model was loaded with
        self._loads = 0                             # load_engine calls under way (from their start)
        self._failed_load: tuple | None = None      # (engine_key, message) of the last failure shown
        self._background: set[asyncio.Task] = set()
        self.exit_code = 0                          # the process's, once the connection ends
        self._reporting = False                     # inside report_server_error (its own sends may fail)
        self.closing = False                        # `exit` came, or the connection ended: nothing more to send
        self.session.scheduler.on_failure = self.report_engine_failure
        self.session.on_notice = self.warn_user
        self.client_log = ClientLogHandler(self)

    def forward_logs(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send spanfill's warnings to the client through `loop`, the connection's: one handler per
        server, however often a client initializes, pointed at the latest connection."""
        self.client_log.loop = loop
        logging.getLogger("spanfill").addHandler(self.client_log)    # a no-op when it is there already

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """Serve the client on stdin and stdout, reading stdin on the event loop where it can
        (streams.py). The connection's end (`exit`, the end of input, a client gone) ends the server."""
        self._stop_event = stop = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

        async def serve() -> None:
            reader = stdin_reader(stdin or sys.stdin.buffer, self.thread_pool)
            log.info("reading stdin %s", "on the event loop" if isinstance(reader, MessageReader) else "on a thread")
            await run_async(stop_event=stop, reader=reader, protocol=self.protocol,
                            logger=logging.getLogger("pygls.server"), error_handler=self.report_server_error)

        try:
            asyncio.run(serve())
        except BrokenPipeError:
            log.error("the client is gone: its end of the connection closed")
        except (KeyboardInterrupt, SystemExit):    # SystemExit: pygls's `exit` handler
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one client over TCP, reading through `MessageReader`. A second connection while one
        is open is closed at once (pygls pointed every response at the newest one). The connection's
        end, however it comes (`exit`, EOF, a reset), ends the server as on stdio."""
        self._stop_event = stop = threading.Event()
        pygls_log = logging.getLogger("pygls.server")       # not spanfill's: that one reaches the client
        busy = False

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal busy
            if busy:
                log.warning("refused a second TCP connection: one client at a time")
                writer.close()
                return
            busy = True
            self.protocol.set_writer(writer)
            try:
                await run_async(stop_event=stop, reader=MessageReader(reader), protocol=self.protocol,
                                logger=pygls_log, error_handler=self.report_server_error)
            except ConnectionError as err:
                log.info("the TCP connection ended: %s", err)
            except ValueError as err:    # a Content-Length past what int() reads (4300 digits), from pygls's loop
                log.error("the TCP connection sent what is not LSP: %s", err)
            except SystemExit:           # pygls's `exit` handler; on_exit has set the code serve.main exits with
                pass
            finally:
                writer.close()           # the listener's close waits for open connections (Python 3.12.1+)
                self.shutdown()

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            log.info("serving on %s", ", ".join(str(sock.getsockname()) for sock in self._server.sockets))
            async with self._server:
                await self._server.serve_forever()

        try:
            asyncio.run(listen())
        except (asyncio.CancelledError, KeyboardInterrupt):      # shutdown() closed the listening socket
            pass

    def shutdown(self) -> None:
        """The connection has ended (`exit`, or the client went away without one): no more engine work."""
        self.closing = True
        logging.getLogger("spanfill").removeHandler(self.client_log)
        self.session.scheduler.close()
        super().shutdown()

    def report_engine_failure(self, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    def report_server_error(self, error: Exception, source) -> None:
        """pygls's reader hands over what it could not handle. The protocol answers every message it
        could parse, so from the reader (source JsonRpcException) this is a body that is not JSON."""
        if source is JsonRpcException:
            self.protocol.refuse_unparsable(error)
        elif self.closing or self._reporting:
            # after `exit` the client's pipe is closed, and a response still pending fails to send; pygls's
            # default reported each failure to the client, which failed and was reported again (to the
            # recursion limit: 6.5 MB of tracebacks); a report that fails itself is not reported either
            log.debug("not reported to the client: %s", error)
        else:
            self._reporting = True
            try:
                super().report_server_error(error, source)
            finally:
                self._reporting = False

    def warn_user(self, message: str) -> None:
        log.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    def update_settings(self, raw) -> Settings:
        """Apply what the client sent; report and skip invalid values. Returns the previous settings."""
        previous = self.session.settings
        self.session.settings, problems = apply_settings(previous, raw, self.session.defaults)
        for problem in problems:
            self.warn_user(problem)
        return previous

    def lost_document(self, uri: str, method: str, detail: str) -> None:
        """A didOpen or didChange of `uri` could not be read (protocol.py): forget the document, and
        say so once (its later changes, unread or not, go to a document the server no longer has)."""
        was_open = self.session.documents.get(uri) is not None
        self.session.forget(uri)
        if was_open or method == types.TEXT_DOCUMENT_DID_OPEN:
            self.session.lost.add(uri)
            self.warn_user(f"spanfill: no completions in {uri} until it is opened again: its {method} could not "
                           f"be read ({detail[:200]})")

    def check_context_budget(self) -> None:
        """Tell the user when the model or the settings have just cut maxContextTokens, rather
        than at the next completion."""
        if (engine := self.session.scheduler.engine) is not None:
            self.session.context_tokens(engine)

    def client_supports(self, *path: str) -> bool:
        node = self.client_capabilities
        for name in path:
            node = getattr(node, name, None)
        return bool(node)

    async def _progress_token(self) -> str | None:
        if not self.client_supports("window", "work_done_progress"):
            return None
        token = f"spanfill/load/{next(self._progress_ids)}"
        create = asyncio.ensure_future(self.work_done_progress.create_async(token))
        create.add_done_callback(lambda f: f.cancelled() or f.exception())    # a late failure: retrieved
        try:   # shielded: a late answer still finds its request waiting (a cancelled one raised on it)
            await asyncio.wait_for(asyncio.shield(create), PROGRESS_CREATE_TIMEOUT_S)
        except asyncio.TimeoutError:   # the model is not held back by a client that never answers
            log.warning("no progress reporting: no answer to window/workDoneProgress/create in %g s",
                        PROGRESS_CREATE_TIMEOUT_S)
            return None
        except Exception as err:   # the client said it supports progress but refused the token
            log.warning("no progress reporting: window/workDoneProgress/create failed: %s", err)
            return None
        return token

    @property
    def load_due(self) -> bool:
        """Whether settings that name the same model should load it again: its load failed, none serves,
        and no load is under way."""
        return self.session.scheduler.state == "failed" and self._loads == 0

    async def load_engine(self) -> None:
        self._loads += 1
        try:
            await self._load_engine()
        finally:
            self._loads -= 1

    async def _load_engine(self) -> None:
        """Load the model named by the settings on the worker, with `$/progress` where the client
        supports it. A model that fails to load is reported (the same failure again, logged); the
        previous one keeps serving, and is loaded again if it broke meanwhile (the scheduler's own
        reload was superseded by this load)."""
        settings = self.session.settings
        name = settings.model or "the shipped model"
        # the load starts before the progress round trip: a request meanwhile waits for this model (it
        # was answered "not loaded yet"); newer settings' load, started later, takes over from it
        loading = asyncio.ensure_future(self.session.scheduler.load(settings.model, settings.device, settings.dtype,
                                                                    settings.engine_threads))
        loading.add_done_callback(lambda f: f.cancelled() or f.exception())   # retrieved if no one awaits it (exit)
        await asyncio.sleep(0)        # the scheduler's state is "loading" from here on
        token = await self._progress_token()
        reload = False
        if token:
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="spanfill", message=f"loading {name} on {settings.device}"))
        try:
            engine = await loading
            self._loaded, self._failed_load = settings, None
            info = engine.info
            dtype = info["dtype"] + (" with int8 matmuls" if info["int8_matmuls"] else "")
            done = f"model ready: {info['model']} ({info['device']}, {dtype}, {info['params']:,} parameters)"
            log.info("%s", done)
        except LoadSuperseded as err:     # newer settings are loading: that load reports, and decides
            done = f"not serving {name}: {err}"
            log.info("%s", done)
        except Exception as err:
            done = f"spanfill: could not load model {name}: {err}"
            if (settings.engine_key, done) != self._failed_load:   # a retry failing alike (a toggle) is logged only
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=done))
            self._failed_load = settings.engine_key, done
            log.error("%s", done)
            # keep serving with the model we have, and say so in the settings: unless newer settings name
            # another model, whose own load (queued behind this one) decides
            if self._loaded is not None and self.session.settings.engine_key == settings.engine_key:
                old = self._loaded
                self.session.settings = dataclasses.replace(self.session.settings, model=old.model,
                                                            device=old.device, dtype=old.dtype, threads=old.threads)
                reload = self.session.scheduler.engine is None and old.engine_key != settings.engine_key
        if token:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=done))
        if reload:
            log.info("the model that served broke while %s loaded: loading it again", name)
            await self._load_engine()
            return
        self.check_context_budget()

    async def enable_fallback(self, dynamic: bool) -> None:
        """Serve textDocument/completion: advertised at initialize, or registered later if the
        client allows dynamic registration."""
        if types.TEXT_DOCUMENT_COMPLETION in self.protocol.fm.features:
            return
        self.feature(types.TEXT_DOCUMENT_COMPLETION)(on_completion)
        if not dynamic:
            return
        restart = "spanfill: completionFallback takes effect after the editor restarts the server"
        if not self.client_supports("text_document", "completion", "dynamic_registration"):
            self.warn_user(restart)
            return
        try:
            await self.client_register_capability_async(types.RegistrationParams(registrations=[
                types.Registration(id="spanfill-completion", method=types.TEXT_DOCUMENT_COMPLETION,
                                   register_options=types.CompletionRegistrationOptions(document_selector=None))]))
        except Exception as err:   # the client refused after all
            self.warn_user(f"{restart} (client/registerCapability failed: {err})")

    def in_background(self, coroutine) -> None:
        """Run `coroutine` beside the handler that starts it (held here: the loop keeps tasks weakly)."""
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


server = SpanfillServer()


@server.feature(types.INITIALIZE)
async def on_initialize(ls: SpanfillServer, params: types.InitializeParams) -> None:
    ls.forward_logs(asyncio.get_running_loop())
    ls.session.documents.encoding = ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities)
    ls.update_settings(params.initialization_options)
    if ls.session.settings.completion_fallback:
        await ls.enable_fallback(dynamic=False)


@server.feature(types.INITIALIZED)
async def on_initialized(ls: SpanfillServer, params: types.InitializedParams) -> None:
    try:
        await ls.load_engine()
    except asyncio.CancelledError:
        # the server is exiting while the model loads; pygls's `initialized` handler, which awaits this
        # one through a callback, would log the cancellation as an error with its traceback
        log.debug("exiting during the model load")


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def on_configuration(ls: SpanfillServer, params: types.DidChangeConfigurationParams) -> None:
    raw = params.settings
    if not raw and ls.client_supports("workspace", "configuration"):   # pull-model clients send an empty change
        try:
            pulled = await ls.workspace_configuration_async(types.ConfigurationParams(
                items=[types.ConfigurationItem(section=SECTION)]))
        except JsonRpcException as err:     # the client refused, or its reply was not a list of settings
            ls.warn_user(f"spanfill: settings unchanged: the client's workspace/configuration reply failed: {err}")
            return
        raw = pulled[0] if pulled else None
    previous = ls.update_settings(raw)
    if ls.session.settings.completion_fallback:      # beside the rest: a client may never answer registration
        ls.in_background(ls.enable_fallback(dynamic=True))
    # settings that name another model load it; any settings retry a model that failed with none serving
    # (the user fixed its folder and saved the settings unchanged)
    if ls.session.settings.engine_key != previous.engine_key or ls.load_due:
        await ls.load_engine()
    else:
        ls.check_context_budget()


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def on_open(ls: SpanfillServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.session.documents.open(params.text_document)
    ls.session.lost.discard(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def on_change(ls: SpanfillServer, params: types.DidChangeTextDocumentParams) -> None:
    if ls.session.documents.change(params) is None:
        uri = params.text_document.uri    # one forgotten after an unreadable change was told of then
        log.log(logging.DEBUG if uri in ls.session.lost else logging.WARNING,
                "didChange for %s, which is not open; ignored", uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def on_close(ls: SpanfillServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.session.forget(params.text_document.uri)
    ls.session.lost.discard(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def on_inline_completion(ls: SpanfillServer, params: types.InlineCompletionParams):
    invoked = params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked
    query = completion.Query(params.text_document.uri, params.position,
                             candidates=ls.session.settings.candidates if invoked else 1,
                             debounce=not invoked, selected=params.context.selected_completion_info)
    return completion.inline_items(await completion.suggest(ls.session, query))


async def on_completion(ls: SpanfillServer, params: types.CompletionParams):
    if not ls.session.settings.completion_fallback:
        return types.CompletionList(is_incomplete=False, items=[])
    query = completion.Query(params.text_document.uri, params.position, candidates=1, debounce=True, kind="completion")
    return completion.completion_items(await completion.suggest(ls.session, query))


@server.feature(STATUS)
def on_status(ls: SpanfillServer, params) -> dict:
    return ls.session.status()


@server.feature(DOCUMENT)
def on_document(ls: SpanfillServer, params) -> dict | None:
    uri = getattr(params, "uri", None)
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"{DOCUMENT} takes {{\"uri\": a document's URI}}, not {_as_sent(params)}")
    doc = ls.session.documents.get(uri)
    if doc is None:
        return None
    digest = hashlib.sha256(doc.text.encode("utf-8", "surrogatepass")).hexdigest()
    return {"uri": doc.uri, "version": doc.version, "length": len(doc.text), "sha256": digest}


def _as_sent(value) -> str:
    """A value as JSON, the way the client sent it (pygls hands JSON objects over as namedtuples)."""
    def plain(v):
        if hasattr(v, "_asdict"):
            return {k: plain(x) for k, x in v._asdict().items()}
        return [plain(x) for x in v] if isinstance(v, list) else v
    return json.dumps(plain(value))


def _feedback(ls: SpanfillServer, params, accepted: bool) -> None:
    """Count a verdict. These are notifications, with no response to carry an error, so an id that
    is not a string is logged and ignored: counted as a verdict without an id, it would be counted
    again at every resend."""
    if params is not None and not hasattr(params, "_asdict"):     # pygls hands a JSON object over as a namedtuple
        log.warning("%s ignored: its params %s are not an object; send {\"id\": the item's command.arguments[0]}",
                    ACCEPTED if accepted else REJECTED, _as_sent(params))
        return
    sid = getattr(params, "id", None)
    if sid is not None and not isinstance(sid, str):
        log.warning("%s ignored: its id %s is not a string; send the item's command.arguments[0]",
                    ACCEPTED if accepted else REJECTED, _as_sent(sid))
        return
    if not ls.session.stats.feedback(sid, accepted):
        log.warning("feedback for unknown or already counted suggestion id %r ignored", sid)


@server.feature(ACCEPTED)
def on_accepted(ls: SpanfillServer, params) -> None:
    _feedback(ls, params, accepted=True)


@server.feature(REJECTED)
def on_rejected(ls: SpanfillServer, params) -> None:
    _feedback(ls, params, accepted=False)


@server.command(ACCEPT_COMMAND)
def on_accept_command(ls: SpanfillServer, *arguments) -> None:
    """A request, unlike the feedback notifications: an id that is missing or not a string is refused."""
    sid = arguments[0] if arguments else None
    if not isinstance(sid, str):
        raise JsonRpcInvalidParams(f"{ACCEPT_COMMAND} takes the suggestion's id, a string, as its first "
                                   f"argument (the item's command.arguments[0]); got {_as_sent(sid)}")
    if not ls.session.stats.feedback(sid, accepted=True):
        log.warning("accept for unknown suggestion id %r ignored", sid)


@server.feature(types.SHUTDOWN)
def on_shutdown(ls: SpanfillServer, params) -> None:
    ls.session.scheduler.close()


@server.feature(types.EXIT)
def on_exit(ls: SpanfillServer, params) -> None:
    ls.exit_code = 0 if ls.protocol._shutdown else 1    # LSP: exit before shutdown exits with 1
    ls.closing = True
