"""An engine that raises while completing (a model bug, out of memory): the user is told, the
request and those queued behind it are answered, and the model is loaded again."""
import asyncio
import time

import pytest
from lsprotocol import types

from spanfill.engine import Tokenizer
from spanfill.server.completion import Query, suggest
from spanfill.server.lsp import SpanfillServer
from spanfill.server.scheduler import Scheduler
from spanfill.server.session import Session
from spanfill.server.settings import Settings

from fakes import FakeEngine

SOURCE = "def add(a, b):\n    \n"
CURSOR = types.Position(1, 4)
URIS = ("file:///w/a.py", "file:///w/b.py")


@pytest.fixture(scope="module")
def tok(tiny_model):
    return Tokenizer.from_file(tiny_model / "tokenizer.json")


@pytest.fixture
def failing(tok):
    """A session whose first engine raises MemoryError mid-denoising; the loader hands out the
    engines in `engines` in turn (an exception in the list is raised by that load)."""
    sessions = []

    def make(*later):
        engines = [FakeEngine(tok, error=MemoryError("out of memory"), steps=4, step_s=0.05), *later]
        loads, told = [], []

        def loader(path, **kw):
            loads.append((path, kw))
            engine = engines[len(loads) - 1]
            if isinstance(engine, Exception):
                raise engine
            return engine

        session = Session(Settings(debounce_ms=0))
        session.scheduler = Scheduler(loader=loader)
        session.scheduler.on_failure = told.append
        for uri in URIS:
            session.documents.open(types.TextDocumentItem(uri, "python", 1, SOURCE))
        sessions.append(session)
        return session, engines, loads, told

    yield make
    for session in sessions:
        session.scheduler.close()


def query(uri: str) -> Query:
    return Query(uri, CURSOR, candidates=1, debounce=False)


async def test_a_failed_engine_is_reported_its_queue_answered_and_the_model_reloaded(failing, tok):
    session, (broken, healthy), loads, told = failing(FakeEngine(tok, texts=("return a + b",)))
    await session.scheduler.load("model-dir", "cpu", "fp32", 1)
    running, queued = await asyncio.gather(suggest(session, query(URIS[0])), suggest(session, query(URIS[1])))
    assert running is None and queued is None                    # answered (empty), not left hanging
    assert len(broken.calls) == 1                                 # the queued request never ran on it
    assert len(told) == 1 and "MemoryError: out of memory" in told[0] and "reloading" in told[0]
    answer = await suggest(session, query(URIS[0]))               # waits for the reload
    assert answer.texts == ["return a + b"] and healthy.calls
    assert loads[1] == loads[0] == ("model-dir", {"device": "cpu", "dtype": "fp32", "threads": 1})
    assert session.scheduler.state == "ready" and session.status()["engineFailures"] == 1
    assert session.stats.errors == 2


async def test_a_reload_that_fails_is_reported_and_requests_still_answered(failing):
    session, _, loads, told = failing(RuntimeError("model.safetensors is truncated"))
    await session.scheduler.load("model-dir", "cpu", "fp32")
    assert await suggest(session, query(URIS[0])) is None
    assert await suggest(session, query(URIS[0])) is None         # no engine now: answered, not hung
    assert len(loads) == 2 and session.scheduler.state == "failed"
    assert "could not reload" in told[-1] and "truncated" in told[-1]


def test_the_server_shows_engine_failures_to_the_user(monkeypatch):
    server = SpanfillServer()
    shown = []
    monkeypatch.setattr(server, "window_show_message", shown.append)
    server.session.scheduler.on_failure("spanfill: the engine failed: MemoryError")
    assert shown == [types.ShowMessageParams(type=types.MessageType.Error,
                                             message="spanfill: the engine failed: MemoryError")]


class FailsOnceCancelled(FakeEngine):
    """Raises once its request has been cancelled: the failure lands after its task stopped awaiting."""

    def complete(self, req):
        self.calls.append(req)
        self.running.set()
        deadline = time.monotonic() + 10
        while not req.cancelled() and time.monotonic() < deadline:
            time.sleep(0.001)
        raise MemoryError("out of memory")


async def test_an_engine_that_fails_after_its_request_was_cancelled_is_still_replaced(failing, tok):
    """$/cancelRequest cancels the task awaiting the worker; an engine that raises after that (before
    it next polls the ticket) has no task left to see the failure, and must not stay in service."""
    session, engines, loads, told = failing(FakeEngine(tok, texts=("return a + b",)))
    engines[0] = FailsOnceCancelled(tok)
    await session.scheduler.load("model-dir", "cpu", "fp32", 1)
    running = asyncio.ensure_future(suggest(session, query(URIS[0])))
    await asyncio.to_thread(engines[0].running.wait, 10)          # the engine has the request
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    deadline = time.monotonic() + 10
    while session.scheduler.engine is not engines[1] and time.monotonic() < deadline:
        await asyncio.sleep(0.01)                                 # it raises with no one awaiting: reloaded
    answer = await suggest(session, query(URIS[1]))
    assert answer is not None and answer.texts == ["return a + b"]
    assert len(loads) == 2 and len(told) == 1 and "MemoryError" in told[0]
    assert session.status()["engineFailures"] == 1
