"""Line pieces (core/tokenizer.py): with the shipped tokenizer, encoding a text piece by piece gives
the ids of encoding it whole, on edge cases and on real code cut at random points; `encode_cached`
falls back to whole encoding for any other pre-tokenizer; and the context the engine builds from ids
sent with a request is the one it builds from the request's text.

Real code is the repository's own sources, or the held-out split when $SPANFILL_HELD_OUT names its
held_out.jsonl (the full check: every file, whole and at random cut points)."""
import json
import os
import random
import re
from pathlib import Path

import pytest
import torch
from tokenizers import AddedToken, normalizers, pre_tokenizers

from spanfill.engine import CompletionRequest, Snippet
from spanfill.engine.core.tokenizer import WHITESPACE, BPECodec, Tokenizer, line_pieces, splits_like_gpt2
from spanfill.engine.decoding.healing import Healer
from spanfill.engine.decoding.prompt import Budget, Snippet, context_ids, cut_prefix, cut_suffix

ROOT = Path(__file__).resolve().parents[2]
CUTS_PER_FILE = 10
SLICE_CHARS = 6000      # a 320-token prefix window is about 1,500 characters of code

EDGE_CASES = [
    "", "x", "\n", "\r\n", "\r", "    ", "\t", "\n\n\n", "   \n   \n", " \n \n x", "no line break at all",
    "  leading spaces", "\tx", "\nx", "a\n\nb", "a\n\n", "a\n\tb", "a\n\t", "a\n\t\tb\n", "a\n \tb", "a\n\t b",
    "a\r\nb\r\n", "a\r\n\r\n    b", "a\rb\r\rc", "x = 1   \n    y = 2  \n", "line  \n  \n\tx", "if x:\n    pass\n",
    "def f():\n    return 1\n\n\nclass A:\n\tpass\n", "a\n 's", "a\n's", "a\n  123\n 456", "a\n  ++b", "a\n  \"s\"",
    "naïve = '日本語'\n    ünïcode = 1\n", "😀\n 😀\n\t😀", "\u3000x\n\u3000y", "x\u2028 y\n z", "\x1c\n\x1cx\n \x1c",
    "x\n\x0b\x0cy", "x\n\u00a0y", "x\n \u00a0 y", "\x85\nx", "x\n\u2029\ny", "a  \n\n  \n\t\n    b",
]


def corpus() -> list[str]:
    held_out = os.environ.get("SPANFILL_HELD_OUT")
    if held_out:
        lines = Path(held_out).read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["text"] for line in lines if line.strip()]
    paths = sorted(p for folder in ("engine", "server") for p in (ROOT / folder).rglob("*.py"))
    return [p.read_text(encoding="utf-8") for p in paths]


@pytest.fixture(scope="module")
def tok(shipped_model) -> Tokenizer:
    return Tokenizer.from_file(shipped_model / "tokenizer.json")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return corpus()


def by_pieces(tok: BPECodec, text: str) -> list[int]:
    """Each piece encoded alone (no memo), concatenated."""
    pieces = line_pieces(text)
    assert "".join(pieces) == text
    return [tid for ids in tok.encode_batch(pieces) for tid in ids] if pieces else []


def test_the_shipped_tokenizer_is_one_the_pieces_are_exact_for(tok):
    assert splits_like_gpt2(tok.hf) and tok.piece_ids is not None


def test_whitespace_is_what_the_byte_level_regex_calls_whitespace(tok):
    """`x` + c + c + `x` pre-tokenizes into 4 parts exactly when `\\s` matches c (a space gives 3)."""
    pre = tok.hf.pre_tokenizer
    listed = re.compile(f"[{WHITESPACE}]")
    for code in range(0x10000):
        c = chr(code)
        if 0xD800 <= code < 0xE000 or c == " ":
            continue
        assert (len(pre.pre_tokenize_str(f"x{c}{c}x")) == 4) == bool(listed.match(c)), hex(code)
    assert not any(chr(code).isspace() for code in range(0x10000, 0x110000))


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_encode_the_same_by_pieces(tok, text):
    assert by_pieces(tok, text) == tok.encode(text)
    assert tok.encode_cached(text) == tok.encode(text)
    for cut in range(len(text) + 1):       # every window that starts or ends inside the case
        assert by_pieces(tok, text[:cut]) == tok.encode(text[:cut])
        assert by_pieces(tok, text[cut:]) == tok.encode(text[cut:])


def test_real_code_encodes_the_same_by_pieces_at_random_cut_points(tok, texts):
    """Each file whole and CUTS_PER_FILE slices of it of up to a few windows' length."""
    rng = random.Random(0)
    checked = 0
    for text in texts:
        starts = [rng.randrange(len(text) + 1) for _ in range(CUTS_PER_FILE)]
        slices = [text] + [text[a:a + rng.randrange(SLICE_CHARS)] for a in starts]
        for piece_text, whole in zip(slices, tok.encode_batch(slices)):
            assert by_pieces(tok, piece_text) == (whole if piece_text else [])
            checked += 1
    assert checked == len(texts) * (CUTS_PER_FILE + 1) and len(texts) > 50


def test_a_keystroke_encodes_one_new_piece(tok, texts):
    """Typing a line into the middle of a long file: each keystroke's prefix window differs from the
    last in its final piece only, so one piece is encoded and the rest come from the memo."""
    text = max(texts, key=len)
    cursor = text.index("\n", len(text) // 2) + 1
    start = text.index("\n", cursor - 3000) + 1
    typed = "    spanfill_typed = compute(alpha, beta)"
    tok.encode_cached(text[start:cursor])
    for i in range(1, len(typed) + 1):
        prefix = text[start:cursor] + typed[:i]
        before = len(tok.piece_ids)
        assert tok.encode_cached(prefix) == tok.encode(prefix)
        assert len(tok.piece_ids) - before == 1


@pytest.mark.parametrize("change", ["normalizer", "prefix space", "added token", "split first"])
def test_other_pipelines_encode_whole(shipped_model, change):
    """A pipeline the pieces are not proven for gets `encode` itself, memo or not."""
    tok = Tokenizer.from_file(shipped_model / "tokenizer.json")
    if change == "normalizer":
        tok.hf.normalizer = normalizers.NFC()
    elif change == "prefix space":
        tok.hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    elif change == "added token":
        tok.hf.add_tokens([AddedToken("\n    ", normalized=False)])
    else:
        tok.hf.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(), pre_tokenizers.ByteLevel()])
    assert not splits_like_gpt2(tok.hf)
    fallback = BPECodec(tok.hf)
    assert fallback.piece_ids is None
    for text in EDGE_CASES:
        assert fallback.encode_cached(text) == fallback.encode(text)
    if change == "added token":            # why: an added token may span a cut
        assert by_pieces(fallback, "a\n    b") != fallback.encode("a\n    b")


def test_context_ids_from_sent_ids_are_those_from_the_text(tok, texts):
    """A few hundred random cursor positions: windows cut as the engine cuts them, the ids the engine
    builds from ids sent with them, against what it builds from the text alone; healing alike."""
    rng = random.Random(1)
    budget, healer = Budget(), Healer(tok)
    for _ in range(300):
        text = rng.choice(texts)
        offset = rng.randrange(len(text) + 1)
        snippets = [Snippet("pkg/other.py", rng.choice(texts)[:700])]
        prefix = cut_prefix(tok, text[:offset], budget.prefix_tokens)
        suffix = cut_suffix(tok, text[offset:], budget.suffix_tokens)
        from_text = context_ids(tok, text[:offset], text[offset:], snippets, budget)
        assert context_ids(tok, prefix, suffix, snippets, budget, cut=False) == from_text
        sent = context_ids(tok, prefix, suffix, snippets, budget, cut=False,
                           prefix_ids=tok.encode_cached(prefix), suffix_ids=tok.encode_cached(suffix))
        assert sent == from_text
        old, new = healer.heal(from_text), healer.heal(sent)
        assert (new.ids, new.stub) == (old.ids, old.stub)
        assert (new.first_bias is None) == (old.first_bias is None)
        assert new.first_bias is None or torch.equal(new.first_bias, old.first_bias)


def test_ids_of_uncut_windows_are_refused(tok):
    with pytest.raises(ValueError, match="cut=False"):
        context_ids(tok, "x = 1\n", "\n", prefix_ids=tok.encode("x = 1\n"))


def test_the_engine_builds_its_context_from_sent_ids(engine, monkeypatch):
    """The engine's model input is the same with the windows' ids sent as without, and with them it
    encodes neither window."""
    from spanfill.engine.testing import SAMPLE_CODE
    tok, prepared, encoded = engine.tokenizer, [], []
    prepare, encode = engine.cache.prepare, tok.encode
    monkeypatch.setattr(engine.cache, "prepare", lambda ids, **kw: prepared.append(list(ids)) or prepare(ids, **kw))
    monkeypatch.setattr(tok, "encode", lambda text: encoded.append(text) or encode(text))
    for offset in range(40, len(SAMPLE_CODE), len(SAMPLE_CODE) // 6):
        prefix, suffix = SAMPLE_CODE[:offset], SAMPLE_CODE[offset:]
        plain = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, steps=2, cut=False))
        ids = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, steps=2, cut=False,
                                                prefix_ids=tok.encode_cached(prefix), suffix_ids=tok.encode_cached(suffix)))
        assert prepared[-1] == prepared[-2] and ids.texts == plain.texts
        assert prefix in encoded and suffix in encoded           # the text-only request encoded them
        encoded.clear()
        engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, steps=2, cut=False,
                                          prefix_ids=tok.encode_cached(prefix), suffix_ids=tok.encode_cached(suffix)))
        assert prefix not in encoded and suffix not in encoded


def test_a_lone_surrogate_encodes_as_the_replacement_character(tiny_tok):
    """JSON may carry "\\ud800" (no UTF-8 form): it is encoded as U+FFFD instead of failing the text,
    by every path, and an engine request whose context holds one is answered."""
    text = "x = 'a\ud800b'\ny = 1\n"
    same = text.replace("\ud800", "\ufffd")
    assert tiny_tok.encode(text) == tiny_tok.encode(same)
    assert tiny_tok.encode_cached(text) == tiny_tok.encode(same)
    assert tiny_tok.encode_batch([text]) == [tiny_tok.encode(same)]


def test_an_engine_request_with_a_lone_surrogate_is_answered(engine):
    from spanfill.engine import CompletionRequest, Snippet
    result = engine.complete(CompletionRequest(prefix="s = '\udc80", suffix="'\n",
                                               snippets=[Snippet("other.py", "t = '\ud83d'\n")]))
    assert len(result.texts) == 1


def test_a_window_of_no_tokens_is_empty(tok):
    """A budget of 0 keeps nothing (a slice [-0:] would keep everything)."""
    assert cut_prefix(tok, "x = 1\ny = 2\nz = f(", 0) == ""
    assert cut_suffix(tok, ")\nprint(z)\n", 0) == ""
    assert cut_prefix(tok, "x = 1\ny = 2\nz = f(", 4) != ""


@pytest.mark.parametrize("odd", ["\x0c", "\u2028", "\x1e", "\x85"])
def test_windows_start_and_end_at_line_ends_as_lsp_counts_them(tok, odd):
    """A form feed (or another character Python's str.splitlines breaks at) inside a line is no line
    end: a window that cannot hold that line leaves all of it out, rather than starting or ending
    inside it."""
    long_line = "a = 1  # " + "word " * 20 + odd + "b = 2\n"
    # room for the long line's piece after `odd` and the lines below it, not for the long line
    prefix = long_line + "c = 3\nd = f("
    budget = sum(tok.line_counts([odd + "b = 2\n", "c = 3\n", "d = f("]))
    assert cut_prefix(tok, prefix, budget) == "c = 3\nd = f("
    suffix = ")\ne = 4\n" + "g = 5  " + odd + "# " + "word " * 20 + "\nh = 6\n"
    budget = sum(tok.line_counts([")\n", "e = 4\n", "g = 5  " + odd]))
    assert cut_suffix(tok, suffix, budget) == ")\ne = 4\n"
