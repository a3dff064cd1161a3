"""The completion pipeline and scheduler against a fake engine: ranges, typing-through cache,
popup-selection, newest-request-wins, cancellation between steps, clean answers for bad input.

What happens while a request waits is ordered by the test, not by sleeps: the debounce runs on a
clock the test advances (`DebounceClock`), and a `HeldEngine` call waits between two steps until
the test lets it go on."""
import asyncio
import dataclasses
import gc
import itertools
import random
import threading
import time
import weakref

import pytest
from lsprotocol import types

from spanfill.engine import Budget, Timings
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


class HeldEngine(FakeEngine):
    """A FakeEngine whose calls stop between steps `hold_at - 1` and `hold_at` (at that step's poll of
    request.cancelled) and set `held`, until the test sets `release`."""

    def __init__(self, tokenizer, hold_at: int = 0, **args):
        super().__init__(tokenizer, **args)
        self.hold_at = hold_at
        self.held, self.release = threading.Event(), threading.Event()

    def complete(self, req):
        asked, polls = req.cancelled, itertools.count()

        def cancelled() -> bool:
            if next(polls) == self.hold_at + 1:      # FakeEngine polls once before it starts, then per step
                self.held.set()
                self.release.wait()
            return asked()
        req.cancelled = cancelled
        try:
            return super().complete(req)
        finally:
            req.cancelled = asked


class TimedEngine(FakeEngine):
    """A FakeEngine whose results report fixed stage timings, so what the server logs is known."""

    TIMINGS = Timings(tokenize_ms=2.0, context_ms=3.0, denoise_ms=40.0, total_ms=45.0)

    def complete(self, req):
        return dataclasses.replace(super().complete(req), timings=self.TIMINGS)


class DebounceClock:
    """Stands in for `asyncio` in the completion module: a debounce wait ends when the test calls
    `elapse()`; everything else is asyncio's."""

    def __init__(self):
        self.waiting: list[asyncio.Future] = []

    async def sleep(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        self.waiting.append(future)
        await future

    def elapse(self) -> None:
        for future in self.waiting:
            if not future.done():
                future.set_result(None)
        self.waiting.clear()

    def __getattr__(self, name: str):
        return getattr(asyncio, name)


@pytest.fixture
def clock(monkeypatch) -> DebounceClock:
    clock = DebounceClock()
    monkeypatch.setattr("spanfill.server.completion.asyncio", clock)
    return clock


async def until(condition, what: str, timeout_s: float = 10.0) -> None:
    """Wait until condition() holds. The timeout only turns a hang into a failure."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {timeout_s} s"
        await asyncio.sleep(0.001)


def queued_jobs(session: Session) -> int:
    """Jobs waiting for the scheduler's worker thread (not the one it is running)."""
    return session.scheduler._worker._work_queue.qsize()


@pytest.fixture
def make_session(tok):
    """A session with an open document and a fake engine (of `engine_class`) built with the given arguments."""
    sessions = []

    def make(engine_class=FakeEngine, **engine_args):
        session = Session(Settings(debounce_ms=0))
        engine = engine_class(tok, **engine_args)
        session.scheduler.engine, session.scheduler.state = engine, "ready"
        session.documents.open(types.TextDocumentItem(URI, "python", 1, SOURCE))
        sessions.append(session)
        return session, engine

    yield make
    for session in sessions:
        engine = session.scheduler.engine
        if isinstance(engine, HeldEngine):
            engine.release.set()                 # a failed test leaves no worker waiting
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
    assert request.cut is False and request.n == 1 and request.temperature == 0.0 and request.check == "auto"
    item = inline_items(answer).items[0]
    assert item.insert_text == "return a + b" and item.command.arguments == [answer.ids[0], {"source": "engine"}]


@pytest.mark.parametrize("name, values", [("check", (0.3, None)), ("deadline_ms", (150, None))])
async def test_the_check_and_deadline_settings_reach_the_engine(make_session, name, values):
    for value in values:
        session, engine = make_session()
        session.settings = dataclasses.replace(session.settings, **{name: value})
        await suggest(session, query())
        assert getattr(engine.calls[-1], name) == value


async def test_the_checks_time_is_a_stage_of_its_own_where_it_ran(make_session):
    class Checked(FakeEngine):
        def complete(self, req):
            result = super().complete(req)
            result.timings.check_ms = 3.0
            return result
    session, _ = make_session(Checked)
    await suggest(session, query())
    stages = session.stats.snapshot()["engineStagesMs"]
    assert stages["check"]["last"] == 3.0 and "fallback" not in stages and "decode" in stages


async def test_invoked_asks_for_several_sampled_candidates(make_session):
    session, engine = make_session(texts=("return a + b", "return b + a", "return a + b"))
    answer = await suggest(session, query(candidates=3))
    assert answer.texts == ["return a + b", "return b + a"]          # duplicates collapse
    assert engine.calls[0].n == 3 and engine.calls[0].temperature > 0


async def test_only_a_single_candidate_falls_back_to_ar_for_a_text_mostly_cut(make_session):
    """At a multi-line cursor of a Python document, a candidate the Python gate cuts asks for the AR
    fallback when it is the only one; among an invoked request's several, any text shown is worth showing."""
    session, engine = make_session(texts=("return a + b",))
    mostly_cut = "return a + b\n    ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ] ]"      # at the body's empty line
    await suggest(session, query())
    await suggest(session, query(candidates=3))
    single, invoked = engine.calls
    assert single.n == 1 and not single.would_show(mostly_cut) and single.would_show("return a + b")
    assert invoked.n == 3 and invoked.would_show(mostly_cut)


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


async def test_an_invoked_request_asks_the_engine_where_the_cache_holds_fewer_candidates(make_session):
    """An automatic request keeps one candidate: invoking at that cursor (or after typing the whole
    suggestion, where the cache has nothing left) asks the engine for the several an invocation wants."""
    session, engine = make_session(texts=("return a + b", "return b + a"))
    await suggest(session, query())
    invoked = await suggest(session, query(candidates=3))
    assert not invoked.from_cache and invoked.texts == ["return a + b", "return b + a"]
    assert len(engine.calls) == 2 and engine.calls[1].n == 3
    assert (await suggest(session, query(candidates=3))).from_cache    # now it holds them all
    for i, ch in enumerate("return a + b"):
        type_text(session, types.Position(4, 4 + i), ch, version=2 + i)
    end = types.Position(4, 16)
    assert (await suggest(session, query(end))).texts == [] and len(engine.calls) == 2   # typed in full: nothing left
    assert not (await suggest(session, query(end, candidates=3))).from_cache and len(engine.calls) == 3


async def test_a_suggestion_from_another_model_or_other_decoding_settings_is_not_served_again(make_session, tok):
    session, engine = make_session()
    await suggest(session, query())
    assert (await suggest(session, query())).from_cache
    session.settings = dataclasses.replace(session.settings, steps=8)
    assert not (await suggest(session, query())).from_cache and engine.calls[-1].steps == 8
    assert (await suggest(session, query())).from_cache
    session.settings = dataclasses.replace(session.settings, candidates=2)     # no change to what is decoded
    assert (await suggest(session, query())).from_cache
    new = FakeEngine(tok, texts=("return b",))
    session.scheduler.engine = new
    session.scheduler.generation += 1                                       # as a load puts it in service
    answer = await suggest(session, query())
    assert not answer.from_cache and answer.texts == ["return b"] and len(new.calls) == 1


async def test_selected_popup_entry_is_extended(make_session):
    session, engine = make_session(texts=(".floor(a + b)",))
    type_text(session, CURSOR, "ma", version=2)
    at = types.Position(4, 6)
    sel = types.SelectedCompletionInfo(range=types.Range(CURSOR, at), text="math")
    answer = await suggest(session, query(at, selected=sel))
    assert engine.calls[0].prefix.endswith("    math")
    assert answer.texts == ["math.floor(a + b)"] and answer.range == sel.range


def test_a_popup_entry_s_view_splices_the_line_starts_and_never_rescans_the_document(monkeypatch):
    """The document the model sees with a popup entry spliced in takes the document's line starts
    and rescans only around the entry (a scan of the whole text at every request: ~35 ms on a 5 MB
    file); its line starts are those of a fresh scan for random entries and ranges over text made of
    \r, \n and letters (a \r\n forms or splits at the entry's ends)."""
    from spanfill.server import completion, documents
    from spanfill.server.documents import LINE_BREAK, Document

    rng = random.Random(5)
    alphabet = ["a", "b", "\r", "\n", "\r\n"]
    scanned = []
    real = LINE_BREAK

    class Counting:
        def finditer(self, text, pos=0, endpos=None):
            scanned.append((len(text) if endpos is None else endpos) - pos)
            return real.finditer(text, pos, len(text) if endpos is None else endpos)

    for trial in range(400):
        doc = Document(URI, "python", 1, "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 3, 40, 300]))))
        lines = len(doc.line_starts)
        a = types.Position(rng.randrange(lines), rng.randrange(6))
        b = types.Position(min(lines - 1, a.line + rng.choice([0, 0, 1])), rng.randrange(6))
        entry = "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 4])))
        sel = types.SelectedCompletionInfo(range=types.Range(a, b), text=entry)
        monkeypatch.setattr(documents, "LINE_BREAK", Counting())
        scanned.clear()
        view, _, _ = completion._view(doc, Query(URI, b, 1, False, selected=sel), documents.UTF16)
        starts = view.line_starts
        monkeypatch.setattr(documents, "LINE_BREAK", real)
        assert starts == [0] + [m.end() for m in real.finditer(view.text)], (trial, doc.text, sel)
        assert sum(scanned) <= len(entry) + 3, (trial, scanned)


async def test_a_popup_entry_s_range_is_answered_as_the_document_has_it(make_session):
    """The client's range came back as it was sent: past the line's end, or with its end before its
    start, neither of which LSP allows in an answer."""
    session, engine = make_session(texts=(".floor(a + b)",))
    type_text(session, CURSOR, "ma", version=2)
    past = types.SelectedCompletionInfo(range=types.Range(CURSOR, types.Position(4, 99)), text="math")
    answer = await suggest(session, query(types.Position(4, 6), selected=past))
    assert answer.range == types.Range(CURSOR, types.Position(4, 6))     # the line ends there
    reversed_ = types.SelectedCompletionInfo(range=types.Range(types.Position(4, 6), CURSOR), text="th")
    answer = await suggest(session, query(types.Position(4, 6), selected=reversed_))
    assert answer.range == types.Range(types.Position(4, 6), types.Position(4, 6))
    assert engine.calls[-1].prefix.endswith("    math")


async def test_newest_request_wins_during_debounce(make_session, clock):
    session, engine = make_session()
    session.settings = Settings(debounce_ms=300)
    first = asyncio.create_task(suggest(session, query(debounce=True)))
    second = asyncio.create_task(suggest(session, query(debounce=True)))
    await until(lambda: len(clock.waiting) == 2, "both requests in their debounce")
    clock.elapse()
    assert await first is None and (await second).texts == ["return a + b"]
    assert len(engine.calls) == 1 and session.stats.superseded == 1


async def test_superseded_while_queued_never_reaches_the_engine(make_session):
    session, engine = make_session(HeldEngine)
    other = "file:///w/other.py"
    session.documents.open(types.TextDocumentItem(other, "python", 1, "def f():\n    \n"))
    busy = asyncio.create_task(suggest(session, Query(other, types.Position(1, 4), 1, False)))
    await asyncio.to_thread(engine.held.wait)          # the worker is busy with `busy` until released
    queued = asyncio.create_task(suggest(session, query()))
    await until(lambda: queued_jobs(session) == 1, "`queued` in the worker's queue")
    newest = asyncio.create_task(suggest(session, query()))
    await until(lambda: queued_jobs(session) == 2, "`newest` in the worker's queue")
    engine.release.set()
    assert await queued is None and (await newest).texts == ["return a + b"] and await busy
    assert len(engine.calls) == 2                      # busy and newest; queued was dropped


async def test_running_request_stops_between_steps_when_superseded(make_session):
    session, engine = make_session(HeldEngine, steps=20, hold_at=5)
    first = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)          # between its steps 4 and 5
    second = asyncio.create_task(suggest(session, query()))
    await until(lambda: session.stats.requests == 2, "the second request")
    engine.release.set()
    assert await first is None and (await second).texts
    assert engine.stopped_at == [5]


async def test_an_inline_and_a_completion_list_request_for_one_keystroke_are_both_answered(make_session):
    """With completionFallback a client may ask both ways at once: the document's one ticket let the
    second cancel the first, and the ghost text disappeared on most keystrokes."""
    session, engine = make_session(HeldEngine, steps=20, hold_at=5)
    inline = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)
    listed = asyncio.create_task(suggest(session, Query(URI, CURSOR, 1, False, kind="completion")))
    await until(lambda: session.stats.requests == 2, "the completion-list request")
    engine.release.set()
    assert (await inline).texts and (await listed).texts
    newer = asyncio.create_task(suggest(session, query()))          # a newer inline one still supersedes
    assert (await newer).texts and engine.stopped_at == []


async def test_completions_turned_off_while_the_engine_runs_show_nothing(make_session):
    session, engine = make_session(HeldEngine, steps=20, hold_at=5)
    running = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)
    session.settings = Settings(enable={"*": False})          # the user's toggle, mid-request
    engine.release.set()
    assert await running is None


async def test_a_call_stopped_between_its_steps_is_not_an_engine_latency(make_session):
    """Calls the next keystroke cut off went into the engine-latency percentiles: while typing fast,
    their part-calls pulled the published median down."""
    session, engine = make_session(HeldEngine, steps=20, hold_at=5)
    first = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)
    second = asyncio.create_task(suggest(session, query()))
    await until(lambda: session.stats.requests == 2, "the second request")
    engine.release.set()
    assert await first is None and (await second).texts
    assert session.stats.engine_calls == 2 and len(session.stats.engine_ms) == 1
    assert all(len(ms) == 1 for ms in session.stats.stage_ms.values())


async def test_client_cancel_stops_the_engine(make_session):
    session, engine = make_session(HeldEngine, steps=20, hold_at=5)
    task = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    engine.release.set()
    await until(lambda: engine.stopped_at, "the engine to stop")
    assert session.stats.cancelled == 1 and engine.stopped_at == [5]


async def test_a_document_closed_while_its_request_runs_keeps_no_state(make_session, clock):
    session, engine = make_session(HeldEngine, hold_at=2)
    running = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)
    session.forget(URI)
    engine.release.set()
    assert await running is None and engine.stopped_at == [2]     # stopped: nobody waits for its answer
    session.documents.open(types.TextDocumentItem(URI, "python", 1, SOURCE))
    session.settings = Settings(debounce_ms=100)
    debounced = asyncio.create_task(suggest(session, query(debounce=True)))
    await until(lambda: clock.waiting, "the request in its debounce")
    session.forget(URI)                                           # closed during the debounce
    clock.elapse()
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
    session.settings = Settings(debounce_ms=0, line_breaks="lf")     # a client that splits on \n alone
    type_text(session, CURSOR, "t", version=2)
    typed_through = await suggest(session, query(types.Position(CURSOR.line, CURSOR.character + 1)))
    assert typed_through.from_cache and typed_through.texts == ["otal = a + b\n    return total"]


async def test_a_request_the_engine_refuses_is_logged_and_answered_empty(make_session, caplog):
    session, engine = make_session(error=ValueError("span_length=300 is out of range; use 1..256"))
    assert await suggest(session, query()) is None
    assert session.stats.errors == 1 and "span_length=300" in caplog.text


async def test_a_slow_engine_call_is_logged_with_its_stages(make_session, monkeypatch, caplog):
    monkeypatch.setattr("spanfill.server.completion.SLOW_ENGINE_MS", 44.0)
    session, engine = make_session(TimedEngine)                   # every call takes 45 ms, 40 of them decoding
    with caplog.at_level("WARNING", logger="spanfill.server.completion"):
        await suggest(session, query())
        slow = [r.getMessage() for r in caplog.records if "slow engine call" in r.getMessage()]
        assert len(slow) == 1 and slow[0].startswith("slow engine call: 45 ms (window ")
        assert "tokenize 2, prefill 3, decode 40; 10 context tokens, 5 encoded, 4 steps, 1 candidates)" in slow[0]
        monkeypatch.setattr("spanfill.server.completion.SLOW_ENGINE_MS", 45.0)   # not slower than the limit
        caplog.clear()
        await suggest(session, query(types.Position(4, 0)))
        assert len(engine.calls) == 2
        assert not [r for r in caplog.records if "slow engine call" in r.getMessage()]


async def test_a_python_document_never_shows_text_that_cannot_be_python(make_session):
    garbage = "if = =[.[][]]]]\n    return list[[[[[0]"
    session, _ = make_session(texts=("total = a + b\n    return total\n    x = = 1", garbage))
    answer = await suggest(session, query(candidates=2))
    assert answer.texts == ["total = a + b\n    return total"]      # cut to its lines Python takes; the other dropped
    text_uri = "file:///w/notes.txt"                                  # another language: shown as the model wrote it
    session.documents.open(types.TextDocumentItem(text_uri, "plaintext", 1, SOURCE))
    other = await suggest(session, Query(text_uri, CURSOR, candidates=2, debounce=False))
    assert garbage.split("\n")[0] in other.texts[1]


async def test_the_python_gate_knows_a_prefix_window_starts_inside_a_docstring(make_session):
    """A module docstring longer than the prefix window: the window starts inside it, and only the
    document above the window says that its closing quotes close a string."""
    garbage = "if = item.split(item)\n    is not None:"
    session, engine = make_session(texts=(garbage, "return min(items)"))
    source = '"""Inventory helpers.\n\n' + "Each helper takes a list of items.\n" * 200 + '"""\n\n\ndef cheapest(items):\n    \n'
    session.documents.open(types.TextDocumentItem(URI, "python", 1, source))
    answer = await suggest(session, query(types.Position(source.count("\n") - 1, 4), candidates=2))
    assert not engine.calls[0].prefix.startswith('"""')          # the engine saw a window inside the docstring
    assert answer.texts == ["return min(items)"]


class AskingEngine(FakeEngine):
    """A FakeEngine that asks `request.would_show` about each of its candidates, as the real engine
    does before deciding on an AR fallback."""

    def complete(self, req):
        result = super().complete(req)
        self.answers = [req.would_show(text) for text in result.texts]
        return result


async def test_each_candidate_is_post_processed_once(make_session, monkeypatch):
    from spanfill.engine.decoding import postprocess     # where the server's Shown finishes candidates
    finished = []

    def counted(raw, cursor, python=False):
        finished.append(raw)
        return original_finish(raw, cursor, python)
    original_finish = postprocess.finish
    monkeypatch.setattr(postprocess, "finish", counted)
    session, engine = make_session(AskingEngine, texts=("total = a + b", "if = =[.[]"))
    answer = await suggest(session, query(candidates=2))
    assert engine.answers == [True, False]                 # the engine was told what the editor would show
    assert answer.texts == ["total = a + b"]               # and the answer is built from the same texts
    assert sorted(finished) == ["if = =[.[]", "total = a + b"]   # each finished once, not again for the answer



def test_a_new_engine_gets_its_own_context_builder_even_at_a_freed_engines_address(tiny_model, monkeypatch):
    """The builder holds the engine's tokenizer: after a model switch it must be the new engine's, also
    when the new engine lands at the address of the freed one (id() equal: simulated here, as CPython
    may reuse the memory); and the session does not keep a replaced engine alive."""
    import spanfill.server.session as session_module
    monkeypatch.setattr(session_module, "id", lambda obj: 1, raising=False)   # every object at one address
    session = Session(Settings())
    first = FakeEngine(Tokenizer.from_file(tiny_model / "tokenizer.json"))
    session.context_builder(first)
    gone = weakref.ref(first)
    del first
    gc.collect()
    assert gone() is None
    new = FakeEngine(Tokenizer.from_file(tiny_model / "tokenizer.json"))
    assert session.context_builder(new).tok is new.tokenizer


async def test_an_edit_while_a_request_waits_with_no_newer_request_is_not_answered_at_the_old_place(make_session, clock):
    """didChange edits the open document in place; a request that waited (its debounce, the engine)
    through an edit no newer request followed (a format, another client's edit) must not build its
    context, or place its answer, at the offset it had before the edit."""
    session, engine = make_session()
    session.settings = Settings(debounce_ms=100)
    waiting = asyncio.create_task(suggest(session, query(debounce=True)))
    await until(lambda: clock.waiting, "the request in its debounce")
    type_text(session, types.Position(0, 0), "import os\n", version=2)     # above the cursor
    clock.elapse()
    assert await waiting is None and engine.calls == []


async def test_a_keystroke_during_the_engine_call_still_leaves_a_suggestion_to_type_through(make_session):
    session, engine = make_session(HeldEngine, hold_at=2)
    running = asyncio.create_task(suggest(session, query()))
    await asyncio.to_thread(engine.held.wait)
    type_text(session, CURSOR, "r", version=2)                              # typed while the model runs
    engine.release.set()
    assert await running is None                                            # the text moved: not placed
    answer = await suggest(session, query(types.Position(CURSOR.line, CURSOR.character + 1)))
    assert answer.from_cache and answer.texts == ["eturn a + b"] and len(engine.calls) == 1


def test_the_fallback_item_is_the_first_line_by_lsp_s_line_breaks():
    """textDocument/completion offers each text's first line; a form feed or U+2028 inside a line is
    not a line break in LSP (str.splitlines would cut the item there, or drop it)."""
    from spanfill.server.completion import Answer, completion_items
    here = types.Range(types.Position(0, 0), types.Position(0, 0))
    texts = ['msg = "one\u2028two"\nnext()', "x = 1\x0c  # page", "\x0c\ny = 2", "first\r\nsecond", "a\rb", "line\n",
             "b = a * 2\r\n    ", "a = 1\nb = 2\n", "a = 1\n    b = 2\n    "]
    items = completion_items(Answer(texts, here, [str(i) for i in range(len(texts))], False)).items
    assert [i.text_edit.new_text for i in items] == ['msg = "one\u2028two"', "x = 1\x0c  # page", "first", "a",
                                                     "line\n",    # a blank first line offers nothing
                                                     "b = a * 2\r\n    ",   # a line above the cursor's, its indentation after it
                                                     "a = 1\n", "a = 1\n    "]   # the first of several lines above it


def test_the_context_windows_leave_room_for_a_span_longer_than_the_models(tok):
    """With the model's own budget (no maxContextTokens) and a spanLength past the model's, the windows
    shrink to what the positions leave beside that span: the engine refused every long file."""
    class FewPositions(FakeEngine):
        @property
        def info(self) -> dict:
            return {**super().info, "max_positions": 300}      # 256 of context + 16 of span fit; + 96 does not
    engine = FewPositions(tok)
    session = Session(Settings(span_length=96))
    builder = session.context_builder(engine)
    fits = Budget.scaled(300 - 96)        # the engine cuts the snippets to its share (prompt.context_ids)
    assert (builder.prefix_tokens, builder.suffix_tokens) == (fits.prefix_tokens, fits.suffix_tokens)
    assert fits.total <= 300 - 96
    session.settings = Settings()
    own = session.context_builder(engine)
    assert (own.prefix_tokens, own.suffix_tokens, own.snippet_tokens) == (
        engine.budget.prefix_tokens, engine.budget.suffix_tokens, engine.budget.snippet_tokens)
