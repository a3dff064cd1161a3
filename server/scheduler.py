"""Scheduling: one worker thread owns the engine, and the newest request per document wins.

Every completion request takes a `Ticket` for its document; taking one cancels the document's
previous ticket. A cancelled ticket is dropped wherever it is: during the debounce wait, in the
worker's queue (it never reaches the engine), or inside `Engine.complete`, which polls
`request.cancelled` between denoising steps. `$/cancelRequest` cancels the asyncio task awaiting
the worker, which sets the same flag. The event loop only ever awaits the worker, so it keeps
reading messages (and cancellations) while the model runs.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial

from spanfill.engine import CancelledError, CompletionRequest, CompletionResult, Engine


class EngineUnavailable(RuntimeError):
    """No model is loaded (it failed to load, or loading has not started)."""


@dataclass(eq=False)
class Ticket:
    uri: str
    flag: threading.Event = field(default_factory=threading.Event)
    superseded: bool = False          # cancelled by a newer request rather than by the client

    def cancelled(self) -> bool:
        return self.flag.is_set()


class Scheduler:
    def __init__(self) -> None:
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spanfill-engine")
        self._latest: dict[str, Ticket] = {}
        self._loading: asyncio.Future | None = None
        self.engine: Engine | None = None
        self.state = "idle"               # idle -> loading -> ready | failed
        self.error: str | None = None     # why the last load failed

    # -- the model -------------------------------------------------------------------------
    async def load(self, path: str | None, device: str, dtype: str, threads: int | None = None) -> Engine:
        """Load a model on the worker (with `threads` CPU threads, process-wide; None = torch's
        setting). On failure the previous engine (if any) stays in service."""
        loading = asyncio.get_running_loop().run_in_executor(
            self._worker, partial(Engine.load, path, device=device, dtype=dtype, threads=threads))
        self._loading, self.state = loading, "loading"
        try:
            engine = await loading
        except Exception as err:
            if self._loading is loading:
                self.error = str(err)
                self.state = "ready" if self.engine else "failed"
            raise
        if self._loading is loading:
            self.engine, self.state, self.error = engine, "ready", None
        return engine

    async def ready_engine(self) -> Engine:
        """The engine, once the newest load has finished."""
        while self._loading is not None and not self._loading.done():
            try:
                await asyncio.shield(self._loading)
            except Exception:
                pass              # load() records and reports the failure
        if self.engine is None:
            raise EngineUnavailable(self.error or "the model has not been loaded yet")
        return self.engine

    # -- requests --------------------------------------------------------------------------
    def begin(self, uri: str) -> Ticket:
        previous = self._latest.get(uri)
        if previous is not None:
            previous.superseded = True
            previous.flag.set()
        ticket = self._latest[uri] = Ticket(uri)
        return ticket

    def end(self, ticket: Ticket) -> None:
        if self._latest.get(ticket.uri) is ticket:
            del self._latest[ticket.uri]

    async def complete(self, ticket: Ticket, request: CompletionRequest) -> CompletionResult | None:
        """Run `request` on the worker; None if it was cancelled before reaching the engine. A result
        with `cancelled=True` was stopped between denoising steps."""
        engine = await self.ready_engine()
        if ticket.cancelled():
            return None
        request.cancelled = ticket.cancelled
        job = asyncio.get_running_loop().run_in_executor(self._worker, _run, engine, ticket, request)
        try:
            return await job
        except asyncio.CancelledError:
            ticket.flag.set()     # stop it between steps if it is already running
            raise

    def close(self) -> None:
        for ticket in self._latest.values():
            ticket.flag.set()
        self._worker.shutdown(wait=False, cancel_futures=True)


def _run(engine: Engine, ticket: Ticket, request: CompletionRequest) -> CompletionResult | None:
    """On the worker thread."""
    if ticket.cancelled():
        return None               # superseded while queued: never reaches the engine
    try:
        return engine.complete(request)
    except CancelledError:
        return None
