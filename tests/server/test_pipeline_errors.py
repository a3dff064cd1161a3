"""A stage of the completion pipeline that raises something other than the engine's refusal (the
windows, with the engine's tokenizer; the post-processing): the request is answered with nothing,
counted in stats.errors and logged with its traceback. An engine that raises while completing
stays the scheduler's (test_engine_failure.py): counted once, not handled twice."""
import logging

import pytest
from lsprotocol import types

from spanfill.engine import Tokenizer
from spanfill.engine.decoding import postprocess
from spanfill.server import lsp
from spanfill.server.completion import Query, suggest
from spanfill.server.session import Session
from spanfill.server.settings import Settings

from fakes import FakeEngine

URI = "file:///w/calc.py"
SOURCE = "def add(a, b):\n    \n"
CURSOR = types.Position(1, 4)


class BrokenTokenizer:
    """A tokenizer that fails on every call, as the real one does on text it cannot take."""

    def __getattr__(self, name):
        raise RuntimeError("the tokenizer broke")


@pytest.fixture(scope="module")
def tok(tiny_model):
    return Tokenizer.from_file(tiny_model / "tokenizer.json")


@pytest.fixture
def serve():
    """serve(engine) -> a session with `engine` in service and one open document."""
    sessions = []

    def make(engine) -> Session:
        session = Session(Settings(debounce_ms=0))
        session.scheduler.engine, session.scheduler.state = engine, "ready"
        session.documents.open(types.TextDocumentItem(URI, "python", 1, SOURCE))
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        session.scheduler.close()


def query() -> Query:
    return Query(URI, CURSOR, candidates=1, debounce=False)


def broken_windows(tok, monkeypatch):
    return FakeEngine(BrokenTokenizer())


def broken_postprocessing(tok, monkeypatch):
    def finish(raw, cursor, python=False):
        raise IndexError("post-processing broke")
    monkeypatch.setattr(postprocess, "finish", finish)      # where the server's Shown finishes candidates
    return FakeEngine(tok)


@pytest.mark.parametrize("breaks", [broken_windows, broken_postprocessing])
async def test_a_failing_stage_is_answered_empty_counted_and_logged(breaks, tok, serve, monkeypatch, caplog):
    session = serve(breaks(tok, monkeypatch))
    with caplog.at_level(logging.WARNING, logger="spanfill"):
        answer = await suggest(session, query())
    assert answer is None
    assert session.stats.errors == 1
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.exc_info is not None and "broke" in str(record.exc_info[1])   # with its traceback
    assert URI in record.getMessage()


async def test_the_server_answers_a_failing_stage_with_an_empty_list(tok, serve, monkeypatch):
    server = lsp.SpanfillServer()
    server.session = serve(FakeEngine(BrokenTokenizer()))
    params = types.InlineCompletionParams(
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
        text_document=types.TextDocumentIdentifier(URI), position=CURSOR)
    result = await lsp.on_inline_completion(server, params)
    assert result == types.InlineCompletionList(items=[])
    assert server.session.status()["errors"] == 1


async def test_an_engine_that_raises_is_counted_once_and_logged_once(tok, serve, caplog):
    session = serve(FakeEngine(tok, error=RuntimeError("the model broke")))
    with caplog.at_level(logging.WARNING, logger="spanfill"):
        assert await suggest(session, query()) is None
    assert session.stats.errors == 1 and session.scheduler.failures == 1
    assert len([r for r in caplog.records if r.exc_info is not None]) == 1      # the scheduler's
