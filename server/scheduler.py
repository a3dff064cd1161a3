"""Scheduling: one worker thread owns the engine, and the newest request per document wins.

Every completion request takes a `Ticket` for its document; taking one cancels the document's
previous ticket. A cancelled ticket is dropped wherever it is: during the debounce wait, in the
worker's queue (it never reaches the engine), or inside `Engine.complete`, which polls
`request.cancelled` between denoising steps. `$/cancelRequest` cancels the asyncio task awaiting
the worker, which sets the same flag. The event loop only ever awaits the worker, so it keeps
reading messages (and cancellations) while the model runs.

An engine that raises while completing (an error in the model, out of memory) may have left its
caches or device memory half-written, so it is not trusted again: the request fails with
`EngineFailed`, requests queued behind it are failed the same way without running, `on_failure`
tells the user, and the same model is loaded afresh; requests arriving meanwhile wait for it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Callable

from spanfill.engine import CancelledError, CompletionRequest, CompletionResult, Engine, set_threads

log = logging.getLogger(__name__)


class EngineUnavailable(RuntimeError):
    """No model is loaded (it failed to load, or loading has not started)."""


class EngineFailed(RuntimeError):
    """The engine raised while completing, or failed while this request waited; it is being reloaded."""


class LoadSuperseded(RuntimeError):
    """A newer load started before this one ended: its engine (or its failure) is discarded, and the
    newer load decides what serves."""


@dataclass(frozen=True)
class LoadArgs:
    path: str | None
    device: str
    dtype: str
    threads: int | None = None


@dataclass(eq=False)
class Ticket:
    uri: str
    kind: str = "inline"          # the request's kind: a newer one of the same kind for the document supersedes it
    flag: threading.Event = field(default_factory=threading.Event)

    def cancelled(self) -> bool:
        return self.flag.is_set()


def _retire(engine) -> None:
    """An engine out of service stops what it does in the background (Engine.retire)."""
    if (retire := getattr(engine, "retire", None)) is not None:
        retire()


class Scheduler:
    def __init__(self, loader: Callable[..., Engine] = Engine.load) -> None:
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spanfill-engine")
        self._loader = loader             # Engine.load, or a stand-in in tests
        self._latest: dict[tuple[str, str], Ticket] = {}     # (uri, kind): the newest request
        self._loading: asyncio.Future | None = None
        self._newest: LoadArgs | None = None   # the newest load's arguments (read on the worker)
        self._loaded_with: LoadArgs | None = None
        self._broken: Engine | None = None   # the engine that last raised, set on the worker
        self.engine: Engine | None = None
        self.generation = 0               # engines put in service so far: what a cached answer came from
        self.state = "idle"               # idle -> loading -> ready | failed
        self.error: str | None = None     # why the last load (or the last engine) failed
        self.failures = 0                 # engines that raised while completing
        self.on_failure: Callable[[str], None] | None = None   # tells the user (the server shows it)

    # -- the model -------------------------------------------------------------------------
    async def load(self, path: str | None, device: str, dtype: str, threads: int | None = None) -> Engine:
        """Load a model on the worker (with `threads` CPU threads, process-wide; None = torch's
        setting). On failure the previous engine (if any) stays in service. LoadSuperseded: a newer
        load started meanwhile, and this one's outcome is discarded."""
        return await self._start_load(LoadArgs(path, device, dtype, threads))

    def _start_load(self, args: LoadArgs) -> asyncio.Task:
        """Queue a load on the worker; the task ends once the engine is in service (or it failed)."""
        self._newest = args = replace(args)     # its own object: the worker tells the newest load by `is`
        job = asyncio.get_running_loop().run_in_executor(self._worker, self._load_on_worker, args)
        loading = asyncio.ensure_future(self._install(args, job))
        self._loading, self.state = loading, "loading"
        return loading

    def _load_on_worker(self, args: LoadArgs) -> Engine:
        self._broken = None       # the jobs queued behind a failed engine have all run: let it go
        if args is not self._newest:   # a newer load was queued behind this one: its outcome would be discarded
            raise LoadSuperseded("a newer load was queued before this one started")
        return self._loader(args.path, device=args.device, dtype=args.dtype, threads=args.threads)

    async def _install(self, args: LoadArgs, job: asyncio.Future) -> Engine:
        try:
            engine = await job
        except Exception as err:
            if self._loading is not asyncio.current_task():
                raise LoadSuperseded(f"a newer load took over (this one failed: {err})") from err
            self.error = str(err)
            self.state = "ready" if self.engine else "failed"
            self._restore_threads()
            raise
        if self._loading is not asyncio.current_task():
            _retire(engine)
            raise LoadSuperseded("a newer load took over; this one's engine is not served")
        if self.engine is not None and self.engine is not engine:
            _retire(self.engine)
        self.engine, self.state, self.error, self._loaded_with = engine, "ready", None, args
        self.generation += 1
        return engine

    def _restore_threads(self) -> None:
        """After a failed load (which may have set its own thread count, process-wide, before it
        failed), the serving engine's count again, on the worker whose threads run the steps."""
        threads = getattr(self.engine, "threads", None)
        if threads is not None:
            try:
                self._worker.submit(set_threads, threads)
            except RuntimeError:          # the server is shutting down: no more work on the worker
                pass

    def _recover(self, engine: Engine, err: Exception) -> None:
        """Take a failed engine out of service and load its model again (once per failed engine)."""
        if self.engine is not engine:
            return                        # already taken out by an earlier failure
        self.engine, self.failures = None, self.failures + 1
        _retire(engine)
        self.error = f"the engine failed: {type(err).__name__}: {err}"
        log.error("%s", self.error, exc_info=err)
        if self._loading is not None and not self._loading.done():
            self._tell(f"spanfill: {self.error}; the model being loaded takes over")
            return
        args = self._loaded_with
        if args is None:                  # an engine installed by hand: nothing to reload from
            self.state = "failed"
            self._tell(f"spanfill: {self.error}; no completions until the model is loaded again")
            return
        self._start_load(args).add_done_callback(self._reloaded)
        self._tell(f"spanfill: {self.error}; reloading the model (completions resume when it is ready)")

    def _reloaded(self, reload: asyncio.Future) -> None:
        if reload.cancelled() or isinstance(reload.exception(), LoadSuperseded):
            return                        # a newer load (a settings change) took over
        if (err := reload.exception()) is not None:
            log.error("could not reload the model after the engine failed: %s", err)
            self._tell(f"spanfill: could not reload the model after the engine failed: {err}")
        else:
            log.info("model reloaded after the engine failed")

    def _tell(self, message: str) -> None:
        if self.on_failure is not None:
            self.on_failure(message)

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
    def begin(self, uri: str, kind: str = "inline") -> Ticket:
        """The ticket of a new request of `kind` for `uri`, which supersedes the one before it of the
        same kind only: an inline completion and a completion-list request (completionFallback) sent
        for the same keystroke are both answered."""
        previous = self._latest.get((uri, kind))
        if previous is not None:
            previous.flag.set()
        ticket = self._latest[uri, kind] = Ticket(uri, kind)
        return ticket

    def cancel(self, uri: str) -> None:
        """Stop the document's requests (it is closed): between steps if one is running."""
        for (of, _), ticket in list(self._latest.items()):
            if of == uri:
                ticket.flag.set()

    def end(self, ticket: Ticket) -> None:
        if self._latest.get((ticket.uri, ticket.kind)) is ticket:
            del self._latest[ticket.uri, ticket.kind]

    async def complete(self, ticket: Ticket, request: CompletionRequest) -> CompletionResult | None:
        """Run `request` on the worker; None if it was cancelled before reaching the engine. A result
        with `cancelled=True` was stopped between denoising steps. ValueError: the engine refused the
        request (settings the model cannot serve); EngineFailed: the engine broke (see the top)."""
        engine = await self.ready_engine()
        if ticket.cancelled():
            return None
        request.cancelled = ticket.cancelled
        loop = asyncio.get_running_loop()
        job = loop.run_in_executor(self._worker, self._run, engine, ticket, request, loop)
        try:
            return await job
        except asyncio.CancelledError:
            ticket.flag.set()     # stop it between steps if it is already running
            raise
        except (ValueError, EngineFailed):
            raise
        except Exception as err:
            raise EngineFailed(f"the engine failed: {type(err).__name__}: {err}") from err

    def _run(self, engine: Engine, ticket: Ticket, request: CompletionRequest,
             loop: asyncio.AbstractEventLoop) -> CompletionResult | None:
        """On the worker thread. An engine that raised is marked here, before the worker takes its
        next job, so requests queued behind the failure never run on it; and its recovery is queued
        on the event loop from here, ahead of the job's outcome: a request cancelled while it ran
        (`$/cancelRequest`) has no task left to see the failure, and the engine must not stay in
        service."""
        if ticket.cancelled():
            return None               # superseded while queued: never reaches the engine
        if engine is self._broken:
            raise EngineFailed("the engine failed while this request waited")
        try:
            return engine.complete(request)
        except CancelledError:
            return None
        except ValueError:
            raise                     # a refused request: the engine is fine
        except Exception as err:
            self._broken = engine
            try:
                loop.call_soon_threadsafe(self._recover, engine, err)
            except RuntimeError:
                pass                  # the loop has closed: the server is shutting down
            raise

    def close(self) -> None:
        for ticket in self._latest.values():
            ticket.flag.set()
        self._worker.shutdown(wait=False, cancel_futures=True)
