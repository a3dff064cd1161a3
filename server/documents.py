"""Open documents and LSP position encodings.

The server keeps its own document store instead of pygls's: LSP lines end only at `\\n`, `\\r\\n`
or `\\r` (Python's `splitlines` also splits on `\\x0c`, `\\u2028` and more), a `character` past
the end of a line means the end of that line, and conversions must stay fast on a 5 MB single-line
file, so columns are converted by encoding the line once in C rather than walking it in Python.

Offsets are indices into the Python string (code points). Client columns are counted in UTF-16
code units unless the client negotiated `utf-8` or `utf-32` (`general.positionEncodings`).
"""
from __future__ import annotations

import bisect
import itertools
import re
import time
from dataclasses import dataclass, field

from lsprotocol import types

from spanfill.engine import LINE_BREAK   # LSP's line breaks, as the engine's context windows split lines

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
UTF8, UTF16, UTF32 = (types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16,
                      types.PositionEncodingKind.Utf32)


class PositionError(ValueError):
    """A position names a line the document does not have."""


def units_to_chars(line: str, units: int, encoding: str) -> int:
    """Code points in the first `units` client code units of `line` (clamped to the line; a column
    inside a multi-unit character rounds down to that character's start)."""
    if units <= 0:
        return 0
    if encoding == UTF32 or line.isascii():
        return min(units, len(line))
    codec, width = ("utf-8", 1) if encoding == UTF8 else ("utf-16-le", 2)
    try:
        data = line.encode(codec)
    except UnicodeEncodeError:
        # A lone surrogate (half a pair typed) counts as chars_to_units counts it: one UTF-16 unit,
        # three UTF-8 bytes, as U+FFFD does; two halves in a row stay two code points, where a decode
        # of the surrogatepass-encoded line would join them into one character.
        data = LONE_SURROGATE.sub("\ufffd", line).encode(codec)
    return len(data[:width * units].decode(codec, "ignore"))     # "ignore": a cut character rounds down


def chars_to_units(line: str, chars: int, encoding: str) -> int:
    head = line[:chars]
    if encoding == UTF32 or head.isascii():
        return len(head)
    if encoding == UTF8:
        return len(head.encode("utf-8", "surrogatepass"))
    return len(head.encode("utf-16-le", "surrogatepass")) // 2


@dataclass
class Document:
    uri: str
    language_id: str
    version: int
    text: str
    edited_at: float = field(default_factory=time.monotonic)
    last_edit: int = 0                      # offset just after the most recent edit
    _starts: list[int] | None = field(default=None, repr=False)
    _eol: str | None = field(default=None, repr=False)      # eol, counted once per version of the text

    @property
    def line_starts(self) -> list[int]:
        if self._starts is None:
            self._starts = [0] + [m.end() for m in LINE_BREAK.finditer(self.text)]
        return self._starts

    @property
    def eol(self) -> str:
        """The document's line ending: the most common of its line breaks (on a tie the first one),
        "\\n" for a one-line document."""
        if self._eol is None:
            starts = self.line_starts
            if len(starts) < 2:
                return "\n"
            brk = self.text[max(0, starts[1] - 2):starts[1]]
            first = "\r\n" if brk == "\r\n" else brk[-1]
            crlf = self.text.count("\r\n")
            counts = {"\r\n": crlf, "\n": self.text.count("\n") - crlf, "\r": self.text.count("\r") - crlf}
            self._eol = max(counts, key=lambda b: (counts[b], b == first))
        return self._eol

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.line_starts, offset) - 1

    def line_start(self, line: int) -> int:
        starts = self.line_starts
        return starts[line] if line < len(starts) else len(self.text)

    def line_text(self, line: int) -> str:
        """The line without its line break."""
        start = self.line_start(line)
        end = self.line_start(line + 1)
        return self.text[start:end].rstrip("\r\n") if end > start else ""

    def offset_at(self, position: types.Position, encoding: str, *, clamp: bool = False) -> int:
        """Offset of a client position. A line past the end raises PositionError unless `clamp`
        (edits from a client that counts lines differently still land at the end of the text)."""
        if position.line >= len(self.line_starts) or position.line < 0:
            if clamp:
                return len(self.text) if position.line >= 0 else 0
            raise PositionError(f"line {position.line} is out of range: {self.uri} has "
                                f"{len(self.line_starts)} lines")
        line = self.line_text(position.line)
        return self.line_start(position.line) + units_to_chars(line, position.character, encoding)

    def position_at(self, offset: int, encoding: str) -> types.Position:
        line = self.line_of(offset)
        column = offset - self.line_start(line)
        return types.Position(line=line, character=chars_to_units(self.line_text(line), column, encoding))

    def apply_change(self, change: types.TextDocumentContentChangeEvent, encoding: str) -> None:
        if isinstance(change, types.TextDocumentContentChangePartial):
            start = self.offset_at(change.range.start, encoding, clamp=True)
            end = max(start, self.offset_at(change.range.end, encoding, clamp=True))
            self.text = self.text[:start] + change.text + self.text[end:]
            self.last_edit = start + len(change.text)
            self._splice_starts(start, end, len(change.text))
        else:
            self.text = change.text
            self.last_edit = len(change.text)
            self._starts = None
        self._eol = None
        self.edited_at = time.monotonic()

    def apply_changes(self, changes: list, encoding: str) -> None:
        """Apply one didChange's changes in order. Several (a replace-all sends one per match) are
        applied to the document's lines, each edit rewriting the few lines it touches, and the text
        is joined once at the end: apply_change copies the whole text at each edit (10,000 matches
        in a 4 MB file held the event loop for tens of seconds)."""
        if len(changes) <= 1:     # none: the document and the place of its last edit stay as they are
            for change in changes:
                self.apply_change(change, encoding)
            return
        lines = LineEdits(self.text)
        for change in changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                lines.replace(change.range, change.text, encoding)
            else:
                lines = LineEdits(change.text)
        self.text, self._starts, self.last_edit = lines.result()
        self._eol = None
        self.edited_at = time.monotonic()

    def spliced(self, start: int, end: int, text: str) -> "Document":
        """A copy of this version with text[start:end] replaced by `text` (a popup entry spliced in), its
        line starts taken from this one's and rescanned only around the splice."""
        copy = Document(self.uri, self.language_id, self.version, self.text[:start] + text + self.text[end:],
                        _starts=self.line_starts)
        copy._splice_starts(start, end, len(text))
        return copy

    def _splice_starts(self, start: int, end: int, inserted: int) -> None:
        """Bring the line starts up to date after text[start:end] became `inserted` characters (in
        self.text now), rescanning only around the edit: a batch of edits (a replace-all sends one
        per match) costs no rescan of the whole text each. A line break is at most two characters
        (\\r\\n), and one can pair with a neighbour of the edit, so the rescan takes one unchanged
        character on each side: starts up to start - 1 and from end + 2 on keep their line breaks."""
        old = self._starts
        if old is None:
            return                    # computed when first asked for
        lo = max(0, start - 1)
        hi = start + inserted + 2     # new offsets below this are rescanned (old: below end + 2)
        delta = inserted - (end - start)
        mid = [m.end() for m in LINE_BREAK.finditer(self.text, lo, min(hi, len(self.text))) if m.end() < hi]
        tail = old[bisect.bisect_left(old, end + 2):]
        self._starts = old[:bisect.bisect_right(old, lo)] + mid + ([s + delta for s in tail] if delta else tail)


def split_lines(text: str) -> tuple[list[str], list[int]]:
    """(the lines of `text`, each with its line break, the last without one; the offsets just after
    each break)."""
    ends = [m.end() for m in LINE_BREAK.finditer(text)]
    return [text[a:b] for a, b in zip([0] + ends, ends + [len(text)])], ends


class LineEdits:
    """A text as its lines, each with its line break (the last without one), for a batch of edits:
    an edit rewrites the lines it touches and the line before them (a \\r ending that line and a
    \\n the edit puts first form one break; the line an edit ends in keeps its own break, so the
    lines after it are untouched), so its cost is those lines' length and not the document's. An
    edit inside one line that inserts no line break (a replace-all's) is spliced into that line
    with no scan for breaks: it can neither make nor split one, since its columns stop before the
    line's break (a replace-all of 200 matches on a 1 MB minified line took 0.7 s of rescans). A
    change that raises part-way through a batch leaves the document as it was."""

    def __init__(self, text: str):
        self.lines, _ = split_lines(text)
        # (line, column) just after the last edit; before any, the text's end (a whole-document change's)
        self.end = (len(self.lines) - 1, len(self.lines[-1]))

    def _locate(self, position: types.Position, encoding: str) -> tuple[int, int]:
        """(line, column in code points) of a client position, clamped as Document.offset_at(clamp=True)."""
        if position.line < 0:
            return 0, 0
        if position.line >= len(self.lines):
            last = len(self.lines) - 1
            return last, len(self.lines[last])
        raw = self.lines[position.line]
        width = len(raw) - (2 if raw.endswith("\r\n") else 1 if raw.endswith(("\r", "\n")) else 0)
        # counted on the line with its break (one unit each, after every other character) and clamped
        # before it: no copy of a long line without its break
        return position.line, min(units_to_chars(raw, position.character, encoding), width)

    def replace(self, span: types.Range, text: str, encoding: str) -> None:
        """Replace `span` (client positions, clamped; an end before the start is the start, as in
        apply_change) with `text`."""
        start, end = self._locate(span.start, encoding), self._locate(span.end, encoding)
        end = max(start, end)
        line = self.lines[start[0]]
        if start[0] == end[0] and "\r" not in text and "\n" not in text and (text or start[1] or line[end[1]:end[1] + 1] != "\n"):
            # (a line emptied down to a \n break after a line ending in \r joins the two breaks: the scan below)
            self.lines[start[0]] = line[:start[1]] + text + line[end[1]:]
            self.end = (start[0], start[1] + len(text))
            return
        lo, hi = max(0, start[0] - 1), end[0] + 1
        region = "".join(self.lines[lo:hi])
        before = sum(len(line) for line in self.lines[lo:start[0]]) + start[1]
        after = sum(len(line) for line in self.lines[lo:end[0]]) + end[1]
        region = region[:before] + text + region[after:]
        rewritten, ends = split_lines(region)
        if hi < len(self.lines):
            rewritten.pop()           # the region ends with its last line's break: the next line is not in it
        self.lines[lo:hi] = rewritten
        edited = before + len(text)   # where the edit ends, as (line, column) of the lines as they are now
        below = bisect.bisect_right(ends, edited)      # the region's lines before the one it ends in
        self.end = (lo + below, edited - (ends[below - 1] if below else 0))

    def result(self) -> tuple[str, list[int], int]:
        """(text, line starts, offset just after the last edit)."""
        starts = [0, *itertools.accumulate(len(line) for line in self.lines[:-1])]
        return "".join(self.lines), starts, starts[self.end[0]] + self.end[1]


class DocumentStore:
    """The open documents of one session, in the position encoding negotiated at initialize."""

    def __init__(self, encoding: str = UTF16):
        self.encoding = encoding
        self._docs: dict[str, Document] = {}

    def __len__(self) -> int:
        return len(self._docs)

    def open(self, item: types.TextDocumentItem) -> Document:
        doc = Document(item.uri, item.language_id, item.version, item.text)
        self._docs[item.uri] = doc
        return doc

    def change(self, params: types.DidChangeTextDocumentParams) -> Document | None:
        doc = self._docs.get(params.text_document.uri)
        if doc is None:
            return None
        doc.apply_changes(params.content_changes, self.encoding)
        doc.version = params.text_document.version
        return doc

    def close(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def get(self, uri: str) -> Document | None:
        return self._docs.get(uri)

    def recent_others(self, uri: str) -> list[Document]:
        """Open documents other than `uri`, most recently edited first."""
        others = [d for u, d in self._docs.items() if u != uri]
        return sorted(others, key=lambda d: d.edited_at, reverse=True)
