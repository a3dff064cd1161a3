"""Model loads that overlap (settings changed again while a model loads): the newest load decides
what serves, and the settings say what serves."""
import asyncio
import dataclasses
import threading

import pytest
from lsprotocol import types

from spanfill.engine import Tokenizer
from spanfill.server import lsp
from spanfill.server.lsp import SpanfillServer
from spanfill.server.completion import Query, suggest
from spanfill.server.scheduler import LoadSuperseded, Scheduler

from fakes import FakeEngine


async def test_a_load_overtaken_by_a_failing_one_leaves_the_serving_model_and_its_settings(tiny_model, monkeypatch):
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engines = {"A": FakeEngine(tok), "B": FakeEngine(tok)}
    retired = []
    for engine in engines.values():
        engine.retire = lambda engine=engine: retired.append(engine)     # Engine.retire: stop compiling
    b_may_finish = threading.Event()

    def loader(path, **kw):
        if path == "B":
            b_may_finish.wait(10)          # slow: C is asked for while B loads
        if path == "C":
            raise FileNotFoundError("C: no such model directory")
        return engines[path]

    server = SpanfillServer()
    server.session.scheduler = Scheduler(loader=loader)
    shown = []
    monkeypatch.setattr(server, "window_show_message", shown.append)
    monkeypatch.setattr(server, "client_supports", lambda *path: False)    # no client: no progress
    try:
        server.session.settings = dataclasses.replace(server.session.settings, model="A")
        await server.load_engine()
        assert server.session.scheduler.engine is engines["A"] and server.session.scheduler.generation == 1
        loads = []
        for name in ("B", "C"):
            server.session.settings = dataclasses.replace(server.session.settings, model=name)
            loads.append(asyncio.create_task(server.load_engine()))
            await asyncio.sleep(0.05)      # its load is queued on the worker
        b_may_finish.set()
        await asyncio.gather(*loads)
        scheduler = server.session.scheduler
        assert scheduler.engine is engines["A"] and scheduler.state == "ready" and scheduler.generation == 1
        assert server.session.settings.model == "A"          # what serves, not B (never installed)
        assert retired == [engines["B"]]                     # loaded, superseded: out of service at once
        assert [m.type for m in shown] == [types.MessageType.Error] and "C: no such model" in shown[0].message
        assert server.session.status()["model"] == engines["A"].info["model"]
    finally:
        b_may_finish.set()
        server.session.scheduler.close()


async def test_a_client_that_never_answers_the_progress_create_does_not_hold_the_model_back(tiny_model, monkeypatch):
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engine = FakeEngine(tok)
    server = SpanfillServer()
    server.session.scheduler = Scheduler(loader=lambda path, **kw: engine)
    monkeypatch.setattr(server, "client_supports", lambda *path: True)       # it offers progress ...

    answer = asyncio.get_running_loop().create_future()
    asked = []

    async def answered_late(token):
        asked.append(token)
        return await answer                                                    # ... and answers late
    monkeypatch.setattr(server.work_done_progress, "create_async", answered_late)
    monkeypatch.setattr(lsp, "PROGRESS_CREATE_TIMEOUT_S", 0.05)
    try:
        await asyncio.wait_for(server.load_engine(), 10)
        assert server.session.scheduler.engine is engine and server.session.scheduler.state == "ready"
        answer.set_result(None)                     # the late answer finds its request still waiting
        await asyncio.sleep(0)
        assert asked == ["spanfill/load/1"]
    finally:
        server.session.scheduler.close()


async def test_a_request_during_the_progress_round_trip_waits_for_the_model(tiny_model, monkeypatch):
    """The load starts before window/workDoneProgress/create is answered: a request in between waits for
    the model (it was answered "the model has not been loaded yet", an empty suggestion at startup)."""
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engine = FakeEngine(tok)
    server = SpanfillServer()
    server.session.scheduler = Scheduler(loader=lambda path, **kw: engine)
    monkeypatch.setattr(server, "client_supports", lambda *path: True)
    answer = asyncio.get_running_loop().create_future()

    async def answered_later(token):
        return await answer
    monkeypatch.setattr(server.work_done_progress, "create_async", answered_later)
    monkeypatch.setattr(server.work_done_progress, "begin", lambda *a: None)
    monkeypatch.setattr(server.work_done_progress, "end", lambda *a: None)
    try:
        load = asyncio.create_task(server.load_engine())
        await asyncio.sleep(0.01)                              # the client has not answered yet
        waiting = asyncio.create_task(server.session.scheduler.ready_engine())
        await asyncio.sleep(0.05)
        answer.set_result(None)
        assert await asyncio.wait_for(waiting, 10) is engine
        await asyncio.wait_for(load, 10)
    finally:
        server.session.scheduler.close()


async def test_a_model_that_broke_while_a_failing_one_loaded_is_loaded_again(tiny_model, monkeypatch):
    """The serving model breaks (its reload starts), the user asks for another that fails to load:
    the reload was superseded, so the model the settings fall back to is loaded again, not left off."""
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    broken, healthy = FakeEngine(tok, error=MemoryError("out of memory")), FakeEngine(tok, texts=("return 1",))
    a_loads = [broken, healthy, healthy]
    reload_may_finish = threading.Event()

    def loader(path, **kw):
        if path == "B":
            raise FileNotFoundError("B: no such model directory")
        engine = a_loads.pop(0)
        if engine is healthy and len(a_loads) == 1:
            reload_may_finish.wait(10)     # the scheduler's reload of A, slow: B is asked for meanwhile
        return engine

    server = SpanfillServer()
    server.session.scheduler = Scheduler(loader=loader)
    monkeypatch.setattr(server, "window_show_message", lambda params: None)
    monkeypatch.setattr(server, "client_supports", lambda *path: False)
    server.session.documents.open(types.TextDocumentItem("file:///w/a.py", "python", 1, "def f():\n    \n"))
    try:
        server.session.settings = dataclasses.replace(server.session.settings, model="A")
        await server.load_engine()
        assert await suggest(server.session, Query("file:///w/a.py", types.Position(1, 4), candidates=1,
                                                   debounce=False)) is None        # A breaks: reload starts
        server.session.settings = dataclasses.replace(server.session.settings, model="B")
        load_b = asyncio.create_task(server.load_engine())
        await asyncio.sleep(0.05)
        reload_may_finish.set()
        await load_b
        scheduler = server.session.scheduler
        # A serves again: its reload ran and was superseded, or (queued behind B's load) never ran, and
        # A was loaded after B failed
        assert scheduler.engine is healthy and scheduler.state == "ready" and len(a_loads) <= 1
        assert server.session.settings.model == "A"
    finally:
        reload_may_finish.set()
        server.session.scheduler.close()


async def test_a_failed_load_leaves_settings_that_changed_to_another_model_meanwhile(tiny_model, monkeypatch):
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engines = {"A": FakeEngine(tok), "D": FakeEngine(tok)}
    server = SpanfillServer()
    server.session.scheduler = Scheduler(loader=lambda path, **kw: engines[path])
    monkeypatch.setattr(server, "window_show_message", lambda params: None)
    monkeypatch.setattr(server, "client_supports", lambda *path: False)
    load = server.session.scheduler.load

    async def load_or_fail(model, *args):
        if model == "C":   # C fails just as a change of settings to D arrives (D's load is queued after it)
            server.session.settings = dataclasses.replace(server.session.settings, model="D")
            raise FileNotFoundError("C: no such model directory")
        return await load(model, *args)

    try:
        server.session.settings = dataclasses.replace(server.session.settings, model="A")
        await server.load_engine()
        monkeypatch.setattr(server.session.scheduler, "load", load_or_fail)
        server.session.settings = dataclasses.replace(server.session.settings, model="C")
        await server.load_engine()
        assert server.session.settings.model == "D"        # not reverted to A over the newer settings
        assert server.session.scheduler.engine is engines["A"]
        await server.load_engine()                          # D's own load
        assert server.session.scheduler.engine is engines["D"] and server.session.settings.model == "D"
    finally:
        server.session.scheduler.close()


async def test_a_failed_load_gives_the_serving_engine_its_thread_count_back(tiny_model):
    """A load sets its thread count process-wide before its model is ready: one that failed after
    that left the engine that kept serving on the failed load's threads."""
    import torch
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    serving = FakeEngine(tok)

    def loader(path, **kw):
        if path == "B":
            torch.set_num_threads(kw["threads"])
            raise RuntimeError("B: out of memory while warming up")
        serving.threads = torch.get_num_threads()
        return serving

    scheduler = Scheduler(loader=loader)
    loop = asyncio.get_running_loop()
    try:
        await scheduler.load("A", "cpu", "auto")
        with pytest.raises(RuntimeError, match="out of memory"):
            await scheduler.load("B", "cpu", "auto", threads=serving.threads + 1)
        assert scheduler.engine is serving
        assert await loop.run_in_executor(scheduler._worker, torch.get_num_threads) == serving.threads
    finally:
        scheduler.close()


async def test_a_load_whose_progress_token_came_late_does_not_overtake_a_newer_one(tiny_model, monkeypatch):
    """Two model changes in a row, the first one's window/workDoneProgress/create answered after the
    second one's: the first load was queued last and served, while the settings named the second."""
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engines = {"A": FakeEngine(tok), "B": FakeEngine(tok)}
    server = SpanfillServer()
    server.session.scheduler = Scheduler(loader=lambda path, **kw: engines[path])
    monkeypatch.setattr(server, "client_supports", lambda *path: True)
    answers = {}

    async def create(token):
        answers[token] = asyncio.get_running_loop().create_future()
        return await answers[token]
    monkeypatch.setattr(server.work_done_progress, "create_async", create)
    monkeypatch.setattr(server.work_done_progress, "begin", lambda *a: None)
    monkeypatch.setattr(server.work_done_progress, "end", lambda *a: None)
    try:
        loads = []
        for name in ("A", "B"):
            server.session.settings = dataclasses.replace(server.session.settings, model=name)
            loads.append(asyncio.create_task(server.load_engine()))
            await asyncio.sleep(0.01)
        answers["spanfill/load/2"].set_result(None)           # B's answer first
        await asyncio.sleep(0.05)
        answers["spanfill/load/1"].set_result(None)
        await asyncio.wait_for(asyncio.gather(*loads), 10)
        assert server.session.scheduler.engine is engines["B"] and server.session.settings.model == "B"
    finally:
        server.session.scheduler.close()


async def test_a_load_that_a_newer_one_was_queued_behind_is_not_run(tiny_model):
    """Settings that name A, then B while the worker is busy: A's load would be discarded once done
    (a newer load took over), so it does not run at all, and B does not wait for it."""
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engines, loaded = {"A": FakeEngine(tok), "B": FakeEngine(tok)}, []
    busy = threading.Event()

    def loader(path, **kw):
        loaded.append(path)
        return engines[path]
    scheduler = Scheduler(loader=loader)
    try:
        scheduler._worker.submit(busy.wait, 10)             # the worker is busy (a completion)
        a = asyncio.ensure_future(scheduler.load("A", "cpu", "auto"))
        b = asyncio.ensure_future(scheduler.load("B", "cpu", "auto"))
        await asyncio.sleep(0.01)
        busy.set()
        assert await asyncio.wait_for(b, 10) is engines["B"]
        with pytest.raises(LoadSuperseded):
            await a
        assert loaded == ["B"] and scheduler.engine is engines["B"]
    finally:
        busy.set()
        scheduler.close()


async def test_the_engine_a_new_model_replaces_is_retired(tiny_model):
    tok = Tokenizer.from_file(tiny_model / "tokenizer.json")
    engines, retired = {"A": FakeEngine(tok), "B": FakeEngine(tok)}, []
    for engine in engines.values():
        engine.retire = lambda engine=engine: retired.append(engine)
    scheduler = Scheduler(loader=lambda path, **kw: engines[path])
    try:
        await scheduler.load("A", "cpu", "auto")
        await scheduler.load("A", "cpu", "auto")          # the same engine again: still serving
        assert retired == []
        await scheduler.load("B", "cpu", "auto")
        assert scheduler.engine is engines["B"] and retired == [engines["A"]]
    finally:
        scheduler.close()
