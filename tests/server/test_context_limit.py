"""maxContextTokens above what the model holds: windows are cut to the model's positions less the
span, the user is told once per model, and a request deep in a long file is answered."""
import dataclasses

import pytest
from lsprotocol import types

from spanfill.engine.decoding.prompt import Budget
from spanfill.server.completion import Query, suggest
from spanfill.server.session import Session
from spanfill.server.settings import Settings

from long_context import LONG_FILE, MIDDLE, SPAN

URI = "file:///w/long.py"


@pytest.fixture
def session():
    told = []
    session = Session(Settings(max_context_tokens=8192, device="cpu", dtype="fp32"))
    session.on_notice = told.append
    session.documents.open(types.TextDocumentItem(URI, "python", 1, LONG_FILE))
    yield session, told
    session.scheduler.close()


async def complete_in_the_middle(session: Session):
    session.cache.forget(URI)          # the engine answers, not the typing-through cache
    before = session.stats.context_tokens
    answer = await suggest(session, Query(URI, MIDDLE, candidates=1, debounce=False))
    return answer, session.stats.context_tokens - before


async def test_a_budget_above_the_model_is_cut_to_its_positions_and_answered(session, small_models):
    session, told = session
    await session.scheduler.load(str(small_models[0]), "cpu", "fp32")
    session.settings = dataclasses.replace(session.settings, max_context_tokens=None)
    _, own = await complete_in_the_middle(session)                   # the model's own budget
    session.settings = dataclasses.replace(session.settings, max_context_tokens=8192)
    answer, context = await complete_in_the_middle(session)
    assert answer is not None and session.stats.errors == 0, "the engine refused the context"
    assert own < context <= 256 - SPAN             # wider windows than the model's own, within its positions
    assert len(told) == 1
    assert "maxContextTokens" in told[0] and "8192" in told[0] and f"{256 - SPAN}" in told[0]
    await complete_in_the_middle(session)
    assert len(told) == 1                          # said once


async def test_the_cut_follows_a_new_model(session, small_models):
    session, told = session
    await session.scheduler.load(str(small_models[0]), "cpu", "fp32")
    _, before = await complete_in_the_middle(session)
    session.settings = dataclasses.replace(session.settings, model=str(small_models[1]))
    await session.scheduler.load(str(small_models[1]), "cpu", "fp32")
    answer, context = await complete_in_the_middle(session)
    assert answer is not None and session.stats.errors == 0
    assert before < context <= 512 - SPAN          # the new model's room, not the old one's
    assert len(told) == 2 and f"{512 - SPAN}" in told[1]


async def test_the_span_length_setting_leaves_room_for_its_span(session, small_models):
    session, told = session
    session.settings = dataclasses.replace(session.settings, span_length=64)
    await session.scheduler.load(str(small_models[0]), "cpu", "fp32")
    answer, context = await complete_in_the_middle(session)
    assert answer is not None and session.stats.errors == 0
    assert context <= 256 - 64 and f"{256 - 64}" in told[0]


async def test_a_budget_the_model_holds_is_used_as_asked_and_nothing_said(session, small_models):
    session, told = session
    session.settings = dataclasses.replace(session.settings, max_context_tokens=160)
    await session.scheduler.load(str(small_models[1]), "cpu", "fp32")
    answer, context = await complete_in_the_middle(session)
    assert answer is not None and 0 < context <= 160
    assert told == []



async def test_the_snippets_of_other_files_take_their_share_of_the_budget(session, small_models):
    session, told = session
    session.settings = dataclasses.replace(session.settings, max_context_tokens=160)
    await session.scheduler.load(str(small_models[1]), "cpu", "fp32")
    _, alone = await complete_in_the_middle(session)
    session.documents.open(types.TextDocumentItem("file:///w/other.py", "python", 1, LONG_FILE))
    answer, context = await complete_in_the_middle(session)
    assert answer is not None and session.stats.errors == 0
    share = Budget.scaled(160).snippet_tokens       # the trained split of 160 tokens (the model's own: more)
    assert share < session.scheduler.engine.budget.snippet_tokens
    assert 0 < context - alone <= share and context <= 160
