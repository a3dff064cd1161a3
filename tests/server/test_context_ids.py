"""The windows' token ids the server sends: while typing (LF, CRLF and tab-indented documents) the
context builder picks the windows a builder encoding every window whole picks, and sends the ids of
their LF text; through the server, the engine's model input is the one it builds from the text."""
import random

import pytest
from lsprotocol import types
from tokenizers import normalizers

from spanfill.engine import Engine, to_lf
from spanfill.engine.core.tokenizer import Tokenizer
from spanfill.engine.decoding.prompt import context_ids
from spanfill.engine.testing import SAMPLE_CODE
from spanfill.server.completion import Query, suggest
from spanfill.server.context import ContextBuilder
from spanfill.server.documents import Document
from spanfill.server.session import Session
from spanfill.server.settings import Settings

URI = "file:///w/long.py"
TYPED = "    total = sum(item.price for item in basket)  # ünïcode\n\n\tif total:\n        "


def whole_encoding(tok: Tokenizer) -> Tokenizer:
    """The same vocabulary and merges behind a no-op normalizer: `encode_cached` then encodes every
    text whole, as the builder measured windows before it had line pieces."""
    tok.hf.normalizer = normalizers.Sequence([])
    plain = Tokenizer(tok.hf)
    assert plain.piece_ids is None
    return plain


def keystrokes(text: str, seed: int):
    """(text, cursor) while typing TYPED one character at a time at a few places, and deleting it again."""
    rng = random.Random(seed)
    for _ in range(3):
        at = text.index("\n", rng.randrange(len(text) // 4, 3 * len(text) // 4)) + 1
        for i in range(len(TYPED) + 1):
            yield text[:at] + TYPED[:i] + text[at:], at + i
        for i in range(len(TYPED), -1, -7):
            yield text[:at] + TYPED[:i] + text[at:], at + i


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\t"])
def test_typing_gets_the_windows_of_whole_encoding_and_the_ids_of_their_lf_text(shipped_model, eol):
    tok = Tokenizer.from_file(shipped_model / "tokenizer.json")
    plain = whole_encoding(Tokenizer.from_file(shipped_model / "tokenizer.json"))
    text = SAMPLE_CODE * 40
    text = text.replace("\n", "\r\n") if eol == "\r\n" else text.replace("    ", "\t") if eol == "\t" else text
    pieces, whole = (ContextBuilder(t, 320, 96, snippet_tokens=96, snippet_files=2) for t in (tok, plain))
    other = Document("file:///w/other.py", "python", 1, SAMPLE_CODE)
    for n, (typed, cursor) in enumerate(keystrokes(text, seed=len(eol))):
        doc = Document(URI, "python", n, typed)
        got, want = pieces.build(doc, cursor, [other]), whole.build(doc, cursor, [other])
        assert (got.prefix, got.suffix, got.snippets) == (want.prefix, want.suffix, want.snippets)
        assert got.prefix_ids == want.prefix_ids == plain.encode(to_lf(got.prefix))
        assert got.suffix_ids == want.suffix_ids == plain.encode(to_lf(got.suffix))


async def test_through_the_server_the_model_input_is_the_one_from_the_text(tiny_model, monkeypatch):
    engine = Engine.load(tiny_model, device="cpu", dtype="fp32", warmup=False, compile=False)
    tok, calls = engine.tokenizer, []
    prepare, complete = engine.cache.prepare, engine.complete

    def recorded_complete(req):
        calls.append([req, None])
        return complete(req)

    def recorded_prepare(ids, **kw):
        calls[-1][1] = list(ids)
        return prepare(ids, **kw)
    monkeypatch.setattr(engine, "complete", recorded_complete)
    monkeypatch.setattr(engine.cache, "prepare", recorded_prepare)

    session = Session(Settings(debounce_ms=0))
    session.scheduler.engine, session.scheduler.state = engine, "ready"
    text = (SAMPLE_CODE * 30).replace("\n", "\r\n")
    session.documents.open(types.TextDocumentItem(URI, "python", 0, text))
    session.documents.open(types.TextDocumentItem("file:///w/other.py", "python", 0, SAMPLE_CODE))
    try:
        line = text.count("\r\n") // 2
        for version, ch in enumerate("    value = ", start=1):
            position = types.Position(line, version - 1)
            session.documents.change(types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=version, uri=URI),
                [types.TextDocumentContentChangePartial(range=types.Range(position, position), text=ch)]))
            await suggest(session, Query(URI, types.Position(line, version), candidates=1, debounce=False))
    finally:
        session.scheduler.close()
    assert len(calls) >= 6 and tok.piece_ids is not None
    for req, model_input in calls:
        assert req.prefix_ids == tok.encode(req.prefix) and req.suffix_ids == tok.encode(req.suffix)
        from_text = context_ids(tok, req.prefix, req.suffix, req.snippets, engine.budget, cut=False)
        assert model_input == engine.healer.heal(from_text).ids
