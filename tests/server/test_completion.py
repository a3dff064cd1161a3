"""The completion pipeline and scheduler against a fake engine: ranges, typing-through cache,
popup-selection, newest-request-wins, cancellation between steps, clean answers for bad input."""
import asyncio

import pytest
from lsprotocol import types

from spanfill.engine.core.tokenizer import Tokenizer
from spanfill.server.completion import Query, inline_items, suggest
from spanfill.server.session import Session
from spanfill.server.settings import Settings

from fakes import FakeEngine

URI = "file:///w/calc.py"
SOURCE = "import math\n\n\ndef add(a, b):\n    \n\n\nprint(add(1, 2))\n"
CURSOR = types.Position(4, 4)


@pytest.fixture(scope="module")
def tok(tiny_model):
    return Tokenizer.from_file(tiny_model / "tokenizer.json")


@pytest.fixture
def make_session(tok):
    """A session with an open document and a fake engine built with the given arguments."""
    sessions = []

    def make(**engine_args):
        session = Session(Settings(debounce_ms=0))
        engine = FakeEngine(tok, **engine_args)
        session.scheduler.engine, session.scheduler.state = engine, "ready"
        session.documents.open(types.TextDocumentItem(URI, "python", 1, SOURCE))
        sessions.append(session)
        return session, engine

    yield make
    for session in sessions:
        session.scheduler.close()


@pytest.fixture
def setup(make_session):
    return make_session()


def type_text(session, position: types.Position, text: str, version: int) -> None:
    session.documents.change(types.DidChangeTextDocumentParams(
        types.VersionedTextDocumentIdentifier(version=version, uri=URI),
        [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=text)]))


def query(position=CURSOR, candidates=1, debounce=False, selected=None):
    return Query(URI, position, candidates=candidates, debounce=debounce, selected=selected)


async def test_completion_in_a_function_body_has_the_cursor_range(setup):
    session, engine = setup
    answer = await suggest(session, query())
    assert answer.texts == ["return a + b"]
    assert answer.range == types.Range(CURSOR, CURSOR)
    request = engine.calls[0]
    assert request.prefix.endswith("def add(a, b):\n    ") and request.suffix.startswith("\n\n\nprint")
    assert request.cut is False and request.n == 1 and request.temperature == 0.0
    item = inline_items(answer).items[0]
    assert item.insert_text == "return a + b" and item.command.arguments == [answer.ids[0], {"source": "engine"}]


async def test_invoked_asks_for_several_sampled_candidates(make_session):
    session, engine = make_session(texts=("return a + b", "return b + a", "return a + b"))
    answer = await suggest(session, query(candidates=3))
    assert answer.texts == ["return a + b", "return b + a"]          # duplicates collapse
    assert engine.calls[0].n == 3 and engine.calls[0].temperature > 0


async def test_typing_through_a_suggestion_is_served_from_the_cache(setup):
    session, engine = setup
    await suggest(session, query())
    for i, ch in enumerate("return a"):
        type_text(session, types.Position(4, 4 + i), ch, version=2 + i)
    answer = await suggest(session, query(types.Position(4, 12)))
    assert answer.from_cache and answer.texts == [" + b"]
    assert answer.range == types.Range(types.Position(4, 12), types.Position(4, 12))
    assert len(engine.calls) == 1 and session.stats.cache_hits == 1
    type_text(session, types.Position(4, 12), "*", version=20)      # diverges: back to the engine
    assert not (await suggest(session, query(types.Position(4, 13)))).from_cache
    assert len(engine.calls) == 2


async def test_selected_popup_entry_is_extended(setup):
    session, engine = setup
    type_text(session, CURSOR, "ma", version=2)
    at = types.Position(4, 6)
    sel = types.SelectedCompletionInfo(range=types.Range(CURSOR, at), text="math")
    answer = await suggest(session, query(at, selected=sel))
    assert engine.calls[0].prefix.endswith("    math")
    assert answer.texts == ["mathreturn a + b"] and answer.range == sel.range


async def test_newest_request_wins_during_debounce(make_session):
    session, engine = make_session()
    session.settings = Settings(debounce_ms=300)   # long enough that a loaded machine still sends the second in time
    first = asyncio.create_task(suggest(session, query(debounce=True)))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(suggest(session, query(debounce=True)))
    assert await first is None and (await second).texts == ["return a + b"]
    assert len(engine.calls) == 1 and session.stats.superseded == 1


async def test_superseded_while_queued_never_reaches_the_engine(make_session):
    session, engine = make_session(steps=5, step_s=0.05)
    other = "file:///w/other.py"
    session.documents.open(types.TextDocumentItem(other, "python", 1, "def f():\n    \n"))
    busy = asyncio.create_task(suggest(session, Query(other, types.Position(1, 4), 1, False)))
    await asyncio.sleep(0.02)                          # the worker is now busy with `busy`
    queued = asyncio.create_task(suggest(session, query()))
    await asyncio.sleep(0.02)
    newest = asyncio.create_task(suggest(session, query()))
    assert await queued is None and (await newest).texts == ["return a + b"] and await busy
    assert len(engine.calls) == 2                      # busy and newest; queued was dropped


async def test_running_request_stops_between_steps_when_superseded(make_session):
    session, engine = make_session(steps=20, step_s=0.02)
    first = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.running.wait, 2)
    second = asyncio.create_task(suggest(session, query()))
    assert await first is None and (await second).texts
    assert engine.stopped_at and engine.stopped_at[0] < 20


async def test_client_cancel_stops_the_engine(make_session):
    session, engine = make_session(steps=20, step_s=0.02)
    task = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.running.wait, 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):                              # the worker notices within one step
        if engine.stopped_at:
            break
        await asyncio.sleep(0.01)
    assert session.stats.cancelled == 1 and engine.stopped_at[0] < 20


async def test_a_document_closed_while_its_request_runs_keeps_no_state(make_session):
    session, engine = make_session(steps=5, step_s=0.05)
    running = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.running.wait, 2)
    session.forget(URI)
    await running
    session.documents.open(types.TextDocumentItem(URI, "python", 1, SOURCE))
    session.settings = Settings(debounce_ms=100)
    debounced = asyncio.create_task(suggest(session, query(debounce=True)))
    await asyncio.sleep(0.01)
    session.forget(URI)                                           # closed during the debounce
    assert await debounced is None
    assert len(session.cache) == 0 and len(session.context_builder(engine)) == 0


async def test_bad_requests_get_no_answer_and_no_engine_call(setup):
    session, engine = setup
    assert await suggest(session, Query("file:///never-opened.py", CURSOR, 1, False)) is None
    assert await suggest(session, query(types.Position(999, 0))) is None
    session.settings = Settings(debounce_ms=0, enable={"*": False})
    assert await suggest(session, query()) is None
    assert engine.calls == []


async def test_character_past_the_line_end_means_the_line_end(setup):
    session, _ = setup
    answer = await suggest(session, query(types.Position(4, 500)))
    assert answer.range.start == CURSOR


async def test_crlf_documents_get_crlf_insert_text(make_session):
    session, engine = make_session(texts=("total = a + b\n    return total",))
    session.documents.open(types.TextDocumentItem(URI, "python", 1, SOURCE.replace("\n", "\r\n")))
    answer = await suggest(session, query())
    assert answer.texts == ["total = a + b\r\n    return total"]
    assert "\r" not in engine.calls[0].prefix


async def test_a_request_the_engine_refuses_is_logged_and_answered_empty(make_session, caplog):
    session, engine = make_session(error=ValueError("span_length=300 is out of range; use 1..256"))
    assert await suggest(session, query()) is None
    assert session.stats.errors == 1 and "span_length=300" in caplog.text


async def test_a_slow_engine_call_is_logged_with_its_stages(make_session, monkeypatch, caplog):
    monkeypatch.setattr("spanfill.server.completion.SLOW_ENGINE_MS", 30.0)
    session, engine = make_session(steps=4, step_s=0.01)
    with caplog.at_level("WARNING", logger="spanfill.server.completion"):
        await suggest(session, query())
    slow = [r.getMessage() for r in caplog.records if "slow engine call" in r.getMessage()]
    assert len(slow) == 1 and "decode 4" in slow[0] and "10 context tokens, 5 encoded, 4 steps" in slow[0]
    monkeypatch.setattr("spanfill.server.completion.SLOW_ENGINE_MS", 1e6)
    caplog.clear()
    await suggest(session, query(types.Position(4, 0)))
    assert len(engine.calls) == 2
    assert not [r for r in caplog.records if "slow engine call" in r.getMessage()]
