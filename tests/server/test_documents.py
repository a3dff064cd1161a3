"""Documents: LSP line semantics and UTF-16/UTF-8/UTF-32 columns with tabs, CRLF and astral
characters; incremental edits; out-of-range positions."""
import random
import re
import time

import pytest
from lsprotocol import types

from spanfill.server import documents
from spanfill.server.documents import (LINE_BREAK, UTF8, UTF16, UTF32, Document, DocumentStore, PositionError,
                                       chars_to_units, units_to_chars)

P = types.Position


def doc(text: str) -> Document:
    return Document("file:///t.py", "python", 1, text)


@pytest.mark.parametrize("encoding,column", [(UTF16, 11), (UTF8, 13), (UTF32, 10)])
def test_column_after_an_emoji(encoding, column):
    d = doc('x = 1\nname = "😋" + s\n')
    # the column just after the closing quote: 10 code points, the emoji is 2 UTF-16 units, 4 UTF-8 bytes
    offset = d.offset_at(P(1, column), encoding)
    assert d.text[offset - 1] == '"' and d.text[offset:offset + 3] == " + "
    assert d.position_at(offset, encoding) == P(1, column)


def test_column_inside_a_surrogate_pair_rounds_down():
    line = "a😋b"
    assert units_to_chars(line, 2, UTF16) == 1          # between the two halves of the emoji
    assert units_to_chars(line, 3, UTF16) == 2
    assert chars_to_units(line, 2, UTF16) == 3


def test_tabs_are_one_unit():
    d = doc("def f():\n\treturn 1\n")
    assert d.text[d.offset_at(P(1, 1), UTF16):].startswith("return")


def test_crlf_and_lone_cr_end_lines_but_form_feed_does_not():
    d = doc("a = 1\r\nb = 2\rc = 3\x0cd\n")
    assert len(d.line_starts) == 4
    assert d.line_text(0) == "a = 1" and d.line_text(1) == "b = 2" and d.line_text(2) == "c = 3\x0cd"
    # a character past the end of a CRLF line means the end of the line, not into the "\r\n"
    assert d.offset_at(P(0, 99), UTF16) == 5


def test_the_line_ending_is_the_one_most_lines_end_with():
    assert doc("a = 1\rb = 2\nc = 3\nd = 4\n").eol == "\n"             # a stray CR on the first line
    assert doc("a = 1\r\nb = 2\nc = 3\r\n").eol == "\r\n"
    assert doc("a = 1\r\nb = 2\n").eol == "\r\n" and doc("a = 1\nb = 2\r\n").eol == "\n"   # a tie: the first
    assert doc("a = 1").eol == "\n" and doc("a = 1\rb\r").eol == "\r"
    d = doc("a = 1\r\nb = 2\r\n")
    assert d.eol == "\r\n"
    d.apply_change(types.TextDocumentContentChangeWholeDocument("a = 1\nb = 2\n"), UTF16)
    assert d.eol == "\n"                                                    # counted again after an edit


def test_line_past_the_end_is_an_error_unless_clamped():
    d = doc("x = 1\n")
    with pytest.raises(PositionError, match="line 5 is out of range"):
        d.offset_at(P(5, 0), UTF16)
    assert d.offset_at(P(5, 0), UTF16, clamp=True) == len(d.text)
    assert d.offset_at(P(1, 0), UTF16) == len(d.text)     # the empty last line exists


def test_incremental_changes_with_astral_characters_and_crlf():
    store = DocumentStore(UTF16)
    uri = "file:///e.py"
    store.open(types.TextDocumentItem(uri, "python", 1, 's = "🎉"\r\nprint(s)\r\n'))

    def change(version, start, end, text):
        store.change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=version, uri=uri),
            [types.TextDocumentContentChangePartial(range=types.Range(start, end), text=text)]))

    change(2, P(0, 8), P(0, 8), "!")                    # after the emoji (2 units) and its quote
    change(3, P(1, 6), P(1, 7), "s + s")
    change(4, P(2, 0), P(2, 0), "x = 1\r\n")
    d = store.get(uri)
    assert d.text == 's = "🎉"!\r\nprint(s + s)\r\nx = 1\r\n'
    assert d.version == 4 and d.last_edit == len(d.text)


def test_full_change_replaces_text():
    store = DocumentStore()
    store.open(types.TextDocumentItem("file:///f", "python", 1, "old"))
    store.change(types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(version=2, uri="file:///f"),
                                                   [types.TextDocumentContentChangeWholeDocument(text="new")]))
    assert store.get("file:///f").text == "new"


def test_recent_others_are_most_recently_edited_first():
    store = DocumentStore()
    for name in "abc":
        store.open(types.TextDocumentItem(f"file:///{name}", "python", 1, name))
    store.get("file:///a").edited_at = time.monotonic() + 1
    assert [d.uri for d in store.recent_others("file:///b")] == ["file:///a", "file:///c"]


def test_five_megabyte_line_converts_exactly():
    d = doc("é" + "x" * 5_000_000)
    offset = d.offset_at(P(0, 4_000_000), UTF16)
    assert d.position_at(offset, UTF16) == P(0, 4_000_000)


class CountingPattern:
    """LINE_BREAK as the module uses it, counting the characters each finditer scans."""

    def __init__(self, pattern):
        self.pattern, self.scanned = pattern, []

    def finditer(self, text, pos=0, endpos=None):
        endpos = len(text) if endpos is None else endpos
        self.scanned.append(max(0, endpos - pos))
        return self.pattern.finditer(text, pos, endpos)


def test_an_edit_rescans_only_around_itself_and_the_line_starts_equal_a_fresh_scan(monkeypatch):
    """The line starts are spliced around each edit, not rescanned (a replace-all sends one edit per
    match: each rescan of a large file stalled the server): random edits over text made of \r, \n
    and letters (a \r\n forms or splits at an edit's either end) agree with a scan of the whole text,
    and each rescans a few characters beyond what it inserts."""
    scan = re.compile(r"\r\n|\r|\n")
    counting = CountingPattern(LINE_BREAK)
    monkeypatch.setattr(documents, "LINE_BREAK", counting)
    rng = random.Random(7)
    alphabet = ["a", "b", "\r", "\n", "\r\n", "é", "😀"]
    doc = Document("file:///w/r.py", "python", 1, "".join(rng.choice(alphabet) for _ in range(2000)))
    for version in range(2, 3000):
        start = rng.randrange(len(doc.text) + 1)
        end = min(len(doc.text), start + rng.choice([0, 0, 1, 2, 3, 8]))
        text = "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 1, 2, 4])))
        change = types.TextDocumentContentChangePartial(
            range=types.Range(doc.position_at(start, UTF32), doc.position_at(end, UTF32)), text=text)
        counting.scanned.clear()
        doc.apply_change(change, UTF32)
        starts = doc.line_starts
        assert sum(counting.scanned) <= len(text) + 3, (version, counting.scanned)
        assert starts == [0] + [m.end() for m in scan.finditer(doc.text)], (version, doc.text)


@pytest.mark.parametrize("encoding", [UTF16, UTF8, UTF32])
def test_a_batch_of_changes_leaves_what_applying_them_one_by_one_leaves(encoding):
    """A didChange with several changes is applied to the document's lines (documents.LineEdits);
    the text, its line starts and the offset after the last edit are those of applying the changes
    one at a time: random batches over text made of \r, \n and astral characters (a \r\n forms or
    splits at an edit's ends), positions past a line's end or the document's, a whole-document change
    among them."""
    rng = random.Random(11)
    alphabet = ["a", "b", "\r", "\n", "\r\n", "é", "😀", "\ud83d"]

    def some_text(n):
        return "".join(rng.choice(alphabet) for _ in range(n))

    for trial in range(300):
        text = some_text(rng.choice([0, 1, 5, 40, 200]))
        one_by_one = Document("file:///w/r.py", "python", 1, text)
        changes = []
        for _ in range(rng.choice([2, 3, 8, 30])):
            if rng.random() < 0.03:
                change = types.TextDocumentContentChangeWholeDocument(some_text(rng.choice([0, 3, 30])))
            else:
                lines = len(one_by_one.line_starts)
                a = P(rng.randrange(lines + 2), rng.randrange(12))      # a line or a column past the end clamps
                b = P(min(a.line + rng.choice([0, 0, 1, 2]), lines + 2), rng.randrange(12))
                change = types.TextDocumentContentChangePartial(range=types.Range(a, b),
                                                                text=some_text(rng.choice([0, 1, 2, 6])))
            one_by_one.apply_change(change, encoding)
            changes.append(change)
        batched = Document("file:///w/r.py", "python", 1, text)
        batched.apply_changes(changes, encoding)
        assert batched.text == one_by_one.text, (trial, text, changes)
        assert batched.line_starts == one_by_one.line_starts == [0] + [m.end() for m in LINE_BREAK.finditer(batched.text)]
        assert batched.last_edit == one_by_one.last_edit, (trial, text, changes)


def test_a_change_notification_with_no_changes_leaves_the_document_and_its_last_edit():
    d = doc("hello\nworld")
    d.apply_change(types.TextDocumentContentChangePartial(range=types.Range(P(0, 1), P(0, 2)), text="E"), UTF16)
    edited_at = d.edited_at
    d.apply_changes([], UTF16)
    assert (d.text, d.last_edit, d.line_starts, d.edited_at) == ("hEllo\nworld", 2, [0, 6], edited_at)


def test_a_replace_all_builds_the_text_once_and_scans_only_the_lines_it_touches(monkeypatch):
    """10,000 one-line edits to a 100,000-line document in one didChange build the document's text
    once (apply_change copied the whole text at each edit: tens of seconds on the event loop) and
    scan for line breaks no more than the lines they touch and the line before each, besides one scan
    of the text to split it into lines."""
    builds = []

    class Counting(Document):
        def __setattr__(self, name, value):
            if name == "text":
                builds.append(len(value))
            super().__setattr__(name, value)

    counting = CountingPattern(LINE_BREAK)
    monkeypatch.setattr(documents, "Document", Counting)
    monkeypatch.setattr(documents, "LINE_BREAK", counting)
    text = "".join(f"    value_{i} = compute(alpha, beta)\n" for i in range(100_000))
    store = DocumentStore(UTF16)
    store.open(types.TextDocumentItem("file:///w/big.py", "python", 1, text))
    changes = [types.TextDocumentContentChangePartial(range=types.Range(P(line, 4), P(line, 9)), text="result")
               for line in range(99_990, -1, -10)]
    builds.clear()
    counting.scanned.clear()
    store.change(types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(version=2, uri="file:///w/big.py"),
                                                   changes))
    d = store.get("file:///w/big.py")
    assert d.text.count("result") == 10_000 and d.line_text(99_990).startswith("    result_99990")
    assert len(builds) == 1
    assert counting.scanned[0] == len(text) and sum(counting.scanned[1:]) < 10_000 * 3 * 45


@pytest.mark.parametrize("order", ["bottom-up", "top-down"])
def test_a_replace_all_on_one_long_line_scans_it_for_line_breaks_once(monkeypatch, order):
    """A replace-all of 200 matches on a 1 MB minified line splices each match into that line: the
    text is scanned for line breaks once (to split it into lines) and not again per edit (each edit
    re-split the line: 0.7 s on the event loop), whichever order the client sends the edits in."""
    counting = CountingPattern(LINE_BREAK)
    monkeypatch.setattr(documents, "LINE_BREAK", counting)
    line = "foo = bar(baz) + qux; " * 50_000
    text = line + "\nend\n"
    d = doc(text)
    columns = [m.start() for m in re.finditer("baz", line)][:200]
    ranges = [types.Range(P(0, c), P(0, c + 3)) for c in columns]
    if order == "bottom-up":    # each range as the document is before it: later matches first
        changes = [types.TextDocumentContentChangePartial(range=r, text="zabz") for r in reversed(ranges)]
    else:                       # each range shifted by the matches already replaced before it
        changes = [types.TextDocumentContentChangePartial(range=types.Range(P(0, r.start.character + i), P(0, r.end.character + i)),
                                                          text="zabz") for i, r in enumerate(ranges)]
    counting.scanned.clear()
    d.apply_changes(changes, UTF16)
    expected = line.replace("baz", "zabz", 200) + "\nend\n"
    assert d.text == expected and d.line_starts == [0, len(expected) - 4, len(expected)]
    assert counting.scanned == [len(text)]
    assert d.last_edit == (columns[0] + 4 if order == "bottom-up" else columns[-1] + 199 + 4)


@pytest.mark.parametrize("encoding", [UTF16, UTF8])
def test_lone_surrogates_count_the_same_both_ways(encoding):
    """A client mid-way through typing a pair sends one half: it is one code point here and one
    UTF-16 unit (three UTF-8 bytes) there, and two halves sent apart stay two code points."""
    for line in ("a\ud800b", "\ud83d\ude00x", "é\udfff😀\ud83d", "\ud800" * 3):
        for chars in range(len(line) + 1):
            assert units_to_chars(line, chars_to_units(line, chars, encoding), encoding) == chars, (line, chars)
    assert units_to_chars("a\ud800b", 2, UTF16) == 2 and units_to_chars("a\ud800b", 3, UTF16) == 3
