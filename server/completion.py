"""The completion pipeline for one request, as named stages (llm-ls style):

    locate the cursor -> typing-through cache -> debounce -> context windows -> engine (worker)
    -> post-processing -> items

`suggest` returns editor-ready texts and the range they replace, or None; the two LSP shapes
(`InlineCompletionList`, and `CompletionItem`s for clients without inline completion) are built
from that answer by `inline_items` and `completion_items`.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time
from dataclasses import dataclass

from lsprotocol import types

from spanfill.engine import MIN_SHOWN_SHARE, CompletionRequest, Cursor, Shown, to_lf

from .cache import Suggestion
from .context import Context
from .documents import LINE_BREAK, Document, PositionError
from .scheduler import EngineFailed, EngineUnavailable, Ticket
from .session import Session

log = logging.getLogger(__name__)

SAMPLING_TEMPERATURE = 0.6     # several candidates only differ when sampled
SAMPLING_TOP_P = 0.95
SLOW_ENGINE_MS = 500.0          # an engine call slower than this is logged with where its time went
ENDS_WITH_INDENT = re.compile(r"(?:\r\n|\r|\n)([ \t]*)$")   # a text that ends with a line break and indentation


@dataclass(frozen=True)
class Query:
    uri: str
    position: types.Position
    candidates: int                                   # 1 for automatic triggers
    debounce: bool                                    # automatic triggers wait for the next keystroke
    selected: types.SelectedCompletionInfo | None = None
    kind: str = "inline"                              # "completion": a completion-list request (the fallback)


@dataclass(frozen=True)
class Answer:
    texts: list[str]              # insert texts, best first
    range: types.Range            # what each text replaces (empty at the cursor, or the popup entry)
    ids: list[str]                # one per text, for accept/reject feedback
    from_cache: bool


def _view(doc: Document, query: Query, encoding: str) -> tuple[Document, int, tuple[int, int]]:
    """The document as the model should see it, the cursor offset in it, and the offsets in `doc`
    of what an answer replaces (the cursor's, or the popup entry's as the document has it: clamped
    to the text and in order). With a popup entry selected, the entry's text is spliced in so
    candidates extend it."""
    sel = query.selected
    if sel is None:
        offset = doc.offset_at(query.position, encoding)
        return doc, offset, (offset, offset)
    start = doc.offset_at(sel.range.start, encoding)
    end = max(start, doc.offset_at(sel.range.end, encoding))
    return doc.spliced(start, end, sel.text), start + len(sel.text), (start, end)


def _request(session: Session, ctx: Context, n: int, shown: Shown) -> CompletionRequest:
    s = session.settings
    sampled = n > 1
    return CompletionRequest(prefix=to_lf(ctx.prefix), suffix=to_lf(ctx.suffix), snippets=ctx.snippets,
                             snippet_tokens=ctx.snippet_tokens,
                             prefix_ids=ctx.prefix_ids, suffix_ids=ctx.suffix_ids,
                             span_length=s.span_length, steps=s.steps, rule=s.rule, threshold=s.threshold, check=s.check,
                             deadline_ms=s.deadline_ms, n=n, temperature=SAMPLING_TEMPERATURE if sampled else 0.0,
                             top_p=SAMPLING_TOP_P if sampled else 1.0, seed=0, greedy_first=True, cut=False,
                             would_show=shown.would_show)


def _unique(texts) -> list[str]:
    return list(dict.fromkeys(t for t in texts if t))


@dataclass(frozen=True)
class _Located:
    doc: Document          # the open document
    view: Document         # what the model sees (the popup entry spliced in, if any)
    offset: int            # cursor offset in `view`
    range: types.Range     # what the answer replaces, in client units
    text: str              # the document's text when the request arrived (didChange edits `doc` in place)
    tail: int              # characters after the cursor in `view` then


def _locate(session: Session, query: Query) -> _Located | None:
    doc = session.documents.get(query.uri)
    if doc is None:     # one forgotten after an unreadable change: the user was told then
        log.log(logging.DEBUG if query.uri in session.lost else logging.WARNING,
                "completion requested for %s, which is not open; send didOpen first", query.uri)
        return None
    if not session.settings.enabled_for(doc.language_id):
        return None
    encoding = session.documents.encoding
    try:
        view, offset, (start, end) = _view(doc, query, encoding)
    except PositionError as err:
        log.warning("completion request ignored: %s", err)
        return None
    replaced = types.Range(doc.position_at(start, encoding), doc.position_at(end, encoding))
    return _Located(doc, view, offset, replaced, doc.text, len(view.text) - offset)


def _still_open(session: Session, at: _Located) -> bool:
    """Whether the document is still the one asked about: one closed (or reopened) while its
    request waited gets no per-document state (context window, cached suggestion) back, which
    nothing would ever free."""
    return session.documents.get(at.doc.uri) is at.doc


def _unchanged(session: Session, at: _Located) -> bool:
    """Whether the document is still open with the text the request arrived with. An edit while it
    waited (the debounce, a model loading, the engine) with no newer request to supersede it (a
    format, another client's edit) moved the text under the request's cursor and range."""
    return _still_open(session, at) and at.doc.text is at.text


def _cursor(ctx: Context, at: _Located) -> Cursor:
    """The cursor post-processing finishes candidates at: the windows the engine saw, and the document
    above the prefix window, from which the Python gate knows whether the window starts inside a
    string or brackets (none where the window is not the document's own text, as when a cursor line
    longer than the budget was cut by tokens)."""
    start = at.offset - len(ctx.prefix)
    known = start > 0 and at.view.text.startswith(ctx.prefix, start, at.offset)
    return Cursor(ctx.prefix, ctx.suffix, at.view.text[:start] if known else "")


def _source(session: Session) -> tuple:
    """What an answer comes from: the engine in service and the settings it decoded with."""
    return session.scheduler.generation, session.settings.decoding_key


async def _from_engine(session: Session, query: Query, ticket: Ticket, at: _Located) -> list[str] | None:
    """Debounce, build the context, run the engine, post-process; None when superseded or refused."""
    stats = session.stats
    if query.debounce and session.settings.debounce_ms:
        await asyncio.sleep(session.settings.debounce_ms / 1e3)
    if ticket.cancelled():
        stats.superseded += 1
        return None
    try:
        engine = await session.scheduler.ready_engine()
    except EngineUnavailable as err:
        log.warning("no completion: %s", err)
        return None
    if not _unchanged(session, at):
        stats.superseded += 1
        return None
    source = _source(session)
    t0 = time.perf_counter()
    ctx = session.context_builder(engine).build(at.view, at.offset, session.documents.recent_others(query.uri))
    window_ms = (time.perf_counter() - t0) * 1e3
    try:
        # among several candidates (an invoked request) the user picks: any text shown is worth showing,
        # and one AR candidate does not replace them all for a short one
        shown = Shown(_cursor(ctx, at), python=at.doc.language_id == "python",
                      min_share=MIN_SHOWN_SHARE if query.candidates == 1 else 0.0)
        result = await session.scheduler.complete(ticket, _request(session, ctx, query.candidates, shown))
    except ValueError as err:      # the engine refused the request (e.g. settings the model cannot serve)
        stats.errors += 1
        log.warning("spanfill: the engine could not complete: %s", err)
        return None
    except EngineFailed:           # the scheduler has told the user and is reloading the model
        stats.errors += 1
        return None
    if result is not None:
        t = result.timings
        stages = {"window": window_ms, "tokenize": t.tokenize_ms, "prefill": t.context_ms, "decode": t.denoise_ms,
                  # the AR check and fallback: percentiles of the calls that ran them
                  **{name: v for name, v in (("check", t.check_ms), ("fallback", t.fallback_ms)) if v > 0}}
        stats.record_engine(result.context_tokens, result.reused_tokens, t.total_ms, stages, answered=not result.cancelled)
        if t.total_ms > SLOW_ENGINE_MS:
            log.warning("slow engine call: %.0f ms (%s; %d context tokens, %d encoded, %d steps, %d candidates%s)",
                        t.total_ms, ", ".join(f"{k} {v:.0f}" for k, v in stages.items()), result.context_tokens,
                        result.encoded_tokens, result.steps_run, query.candidates,
                        ", cancelled" if result.cancelled else "")
    if result is None or result.cancelled:
        stats.superseded += 1
        return None
    texts = [t.replace("\n", at.doc.eol) for t in _unique(shown.text(raw) for raw in result.texts)]
    if _still_open(session, at):   # as the text was when the context was built: a later request may type through it
        session.cache.store(query.uri, Suggestion(at.offset, at.tail, ctx.prefix, ctx.suffix, tuple(texts),
                                                  query.candidates, source))
    if ticket.cancelled() or not _unchanged(session, at):   # a newer request took over, or the text moved
        stats.superseded += 1
        return None
    if not session.settings.enabled_for(at.doc.language_id):   # turned off while the engine ran
        return None
    return texts


async def suggest(session: Session, query: Query) -> Answer | None:
    """The answer to `query`, or None for nothing to show. A stage that raises (the windows, the
    cache, post-processing) is counted in `stats.errors`, logged with its traceback, and answered
    with nothing, as a refused or failed engine call is: the editor asks again at the next
    keystroke, and an error response would reach the user on every one. An engine that raises while
    completing is the scheduler's to report and reload (EngineFailed, counted in `_from_engine`)."""
    try:
        return await _suggest(session, query)
    except Exception:
        session.stats.errors += 1
        log.exception("no completion for %s: the request failed", query.uri)
        return None


async def _suggest(session: Session, query: Query) -> Answer | None:
    started = time.perf_counter()
    stats = session.stats
    stats.requests += 1
    at = _locate(session, query)
    if at is None:
        return None
    ticket = session.scheduler.begin(query.uri, query.kind)
    try:
        texts = session.cache.lookup(query.uri, at.view.text, at.offset, query.candidates, _source(session))
        from_cache = texts is not None
        if from_cache:
            stats.cache_hits += 1
        else:
            texts = await _from_engine(session, query, ticket, at)
            if texts is None:
                return None
    except asyncio.CancelledError:
        stats.cancelled += 1
        raise
    finally:
        session.scheduler.end(ticket)
    stats.latency_ms.append((time.perf_counter() - started) * 1e3)
    head = query.selected.text if query.selected else ""
    texts = [head + t for t in texts[:query.candidates]]
    if session.settings.line_breaks == "lf" and at.doc.eol != "\n":
        texts = [t.replace(at.doc.eol, "\n") for t in texts]    # the cache keeps the document's own
    return Answer(texts, at.range, [stats.issue_id() for _ in texts], from_cache)


def _accept_command(sid: str, from_cache: bool) -> types.Command:
    """What accepting an item runs: arguments[0] its id for feedback, arguments[1] who answered."""
    return types.Command(title="spanfill: suggestion accepted", command="spanfill.accept",
                         arguments=[sid, {"source": "cache" if from_cache else "engine"}])


def inline_items(answer: Answer | None) -> types.InlineCompletionList:
    if answer is None:
        return types.InlineCompletionList(items=[])
    return types.InlineCompletionList(items=[
        types.InlineCompletionItem(insert_text=text, range=answer.range, command=_accept_command(sid, answer.from_cache))
        for text, sid in zip(answer.texts, answer.ids)])


def completion_items(answer: Answer | None) -> types.CompletionList:
    """The fallback for clients without inline completion: the first line of each text, with its line
    break and the indentation the text ends with where it ends with a break and indentation (whole
    lines above the line whose code starts at the cursor: postprocess.at_line_start)."""
    items = []
    if answer is not None:
        for text, sid in zip(answer.texts, answer.ids):
            brk = LINE_BREAK.search(text)      # LSP's line breaks: not str.splitlines' (\x0c, \u2028, ...)
            first = text[:brk.end()] if brk else text
            tail = ENDS_WITH_INDENT.search(text)     # lines above the cursor's: break and indentation last
            line = first + tail.group(1) if tail else first.rstrip("\r\n")
            if not line.strip():
                continue
            items.append(types.CompletionItem(
                label=line.strip(), kind=types.CompletionItemKind.Text, detail="spanfill", sort_text="0",
                filter_text=line.strip(), insert_text_format=types.InsertTextFormat.PlainText,
                text_edit=types.TextEdit(range=answer.range, new_text=line),
                command=_accept_command(sid, answer.from_cache)))
    return types.CompletionList(is_incomplete=True, items=items)
