"""Context windows: line boundaries, token budget, hysteresis across keystrokes (measured as
context-token reuse), and snippets from other open documents."""
import pytest

from spanfill.engine.decoding.prompt import context_ids, cut_prefix, cut_suffix
from spanfill.engine.core.tokenizer import Tokenizer
from spanfill.server.context import ContextBuilder, snippet_path
from spanfill.server.documents import Document

PREFIX_TOKENS, SUFFIX_TOKENS = 320, 96


def python_module(functions: int) -> str:
    blocks = []
    for i in range(functions):
        blocks.append(f'def handler_{i}(request, retries={i % 3}):\n'
                      f'    """Handle request number {i}."""\n'
                      f'    payload = request.json()\n'
                      f'    if payload.get("id") == {i}:\n'
                      f'        return respond(payload, status=200)\n'
                      f'    return None\n\n\n')
    return "".join(blocks)


@pytest.fixture(scope="module")
def tok(tiny_model) -> Tokenizer:
    return Tokenizer.from_file(tiny_model / "tokenizer.json")


@pytest.fixture
def builder(tok) -> ContextBuilder:
    return ContextBuilder(tok, PREFIX_TOKENS, SUFFIX_TOKENS, snippet_tokens=40, snippet_files=2)


def document(text: str, uri: str = "file:///work/app/handlers.py") -> Document:
    return Document(uri, "python", 1, text)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def test_windows_are_cut_on_line_boundaries_within_budget(builder, tok):
    text = python_module(40)
    doc = document(text)
    offset = text.index("def handler_20")
    ctx = builder.build(doc, offset, [])
    assert text[:offset].endswith(ctx.prefix) and text[offset:].startswith(ctx.suffix)
    start = offset - len(ctx.prefix)
    assert start == 0 or text[start - 1] == "\n"
    assert ctx.suffix.endswith("\n")
    assert len(tok.encode(ctx.prefix)) <= PREFIX_TOKENS
    assert len(tok.encode(ctx.suffix)) <= SUFFIX_TOKENS
    assert len(tok.encode(ctx.prefix)) > PREFIX_TOKENS // 2      # and it uses the budget


def test_typing_keeps_the_windows_so_context_tokens_are_reused(builder, tok):
    """Type a line and a half, one character per request: the prefix window keeps its first line
    and the suffix window its lines, so most of each context is the previous context's tokens.
    A window recut on every keystroke (no hysteresis) slides and reuses far less."""
    text = python_module(40)
    offset = text.index("    return None", text.index("def handler_20"))
    typed = "    log.info('handled %s', payload)\n    metrics.count"
    contexts, baseline = [], []
    for i in range(len(typed) + 1):
        doc = document(text[:offset] + typed[:i] + text[offset:])
        ctx = builder.build(doc, offset + i, [])
        contexts.append(context_ids(tok, ctx.prefix, ctx.suffix, cut=False))
        before, after = doc.text[:offset + i], doc.text[offset + i:]
        baseline.append(context_ids(tok, cut_prefix(tok, before, PREFIX_TOKENS),
                                    cut_suffix(tok, after, SUFFIX_TOKENS), cut=False))

    def encoded(seq):    # tokens past the common prefix with the previous context: what the KV cache re-encodes
        return sum(len(b) - common_prefix(a, b) for a, b in zip(seq, seq[1:]))

    reuse = 1 - encoded(contexts) / sum(len(c) for c in contexts[1:])
    assert reuse > 0.95
    assert encoded(contexts) * 3 < encoded(baseline)


def test_window_moves_when_it_overflows_and_when_the_cursor_jumps(builder, tok):
    text = python_module(40)
    doc = document(text)
    first = builder.build(doc, text.index("def handler_10"), [])
    far = builder.build(doc, text.index("def handler_30"), [])
    assert "handler_29" in far.prefix and "handler_9" not in far.prefix
    back = builder.build(doc, text.index("def handler_10"), [])
    assert back.prefix == first.prefix


def test_a_single_line_longer_than_the_budget_is_cut_inside_the_line(builder, tok):
    line = "data = [" + ", ".join(str(i) for i in range(20000)) + "]"
    doc = document(line)
    offset = len(line) - 1
    ctx = builder.build(doc, offset, [])
    assert line[:offset].endswith(ctx.prefix) and 0 < len(tok.encode(ctx.prefix)) <= PREFIX_TOKENS
    assert ctx.suffix == "]"


def test_snippets_come_from_other_documents_most_recent_first(builder):
    here = document(python_module(3))
    models = Document("file:///work/app/models.py", "python", 1, "class User:\n    name: str\n")
    utils = Document("file:///work/app/utils.py", "python", 1, "def slugify(s):\n    return s.lower()\n")
    old = Document("file:///work/app/old.py", "python", 1, "OLD = 1\n")
    ctx = builder.build(here, 10, [utils, models, old])        # snippet_files=2 keeps the first two
    assert [s.path for s in ctx.snippets] == ["app/utils.py", "app/models.py"]
    assert ctx.snippets[0].text.startswith("def slugify")


def test_snippets_from_a_crlf_document_reach_the_model_with_lf(builder):
    other = Document("file:///work/app/win.py", "python", 1, "def f():\r\n    return 1\r\n")
    assert builder.build(document("x = 1\n"), 0, [other]).snippets[0].text == "def f():\n    return 1\n"


def test_snippet_starts_near_the_last_edit(builder):
    long_text = "".join(f"line_{i} = {i}\n" for i in range(200))
    other = Document("file:///w/other.py", "python", 1, long_text, last_edit=long_text.index("line_150"))
    ctx = builder.build(document("x = 1\n"), 0, [other])
    assert ctx.snippets[0].text.startswith("line_142 = 142")


def test_snippet_path_is_short_and_decoded():
    assert snippet_path("file:///home/me/my%20proj/pkg/mod.py") == "pkg/mod.py"
    assert snippet_path("file://[bad/pkg/mod.py") == "pkg/mod.py"        # urlparse raises ValueError
