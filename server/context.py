"""Context builder: the prefix/suffix windows and `<|file|>` snippets sent with each request.

Windows start and end on line boundaries within a token budget (counted with the engine's own
tokenizer and `cut_prefix`/`cut_suffix`, so the server serves exactly the windows the model was
trained on). They also have hysteresis: a window keeps its first line (prefix) and its number of
lines after the cursor (suffix) while its token count stays between LOW and 100% of the budget,
and a recut aims for TARGET of the budget so the next keystrokes have room to grow. Consecutive
keystrokes therefore send the same snippets, the same suffix and a prefix that only grows at its
end: the engine's KV cache (DESIGN §3) re-encodes only the new tokens.

A window's token ids come from the tokenizer's memo of line pieces (`Tokenizer.encode_cached`, the
same ids as encoding the window whole) and go to the engine beside its text, so a keystroke encodes
about one line and the engine encodes no window again.

Snippets come from the other open documents, most recently edited first, each a slice starting a
few lines above its last edit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from spanfill.engine import Snippet, Tokenizer, cut_prefix, cut_suffix, to_lf

from .documents import LINE_BREAK, Document

# The model completes better the more of its budget the windows fill (benchmarks/windows.py), but every
# span step and check pass then attends to more context: windows held at 85-100% of the budget cost the
# typing replay its keystroke-to-suggestion p95 (benchmarks/replay.py, one thread), so they stay here.
LOW = 0.5                 # recut a held window once it shrinks below this share of the budget
TARGET = 0.75             # share of the budget a recut window aims for
CHARS_PER_TOKEN = 8       # no line is cheaper than this; bounds how much text is ever tokenized
SNIPPET_LEAD_LINES = 8    # a snippet starts this many lines above the other document's last edit


@dataclass(frozen=True)
class Context:
    prefix: str                       # text before the cursor, from a line start where the budget allows
    suffix: str                       # text after the cursor, to a line end where the budget allows
    snippets: list[Snippet] = field(default_factory=list)
    prefix_ids: list[int] | None = None   # the token ids of to_lf(prefix) and to_lf(suffix): what the
    suffix_ids: list[int] | None = None   # engine is sent beside the text
    snippet_tokens: int | None = None     # the snippets' share of the budget, in tokens: the engine cuts them to it


@dataclass
class _Window:
    prefix_line: int | None = None    # first line of the prefix window (absolute)
    suffix_lines: int | None = None   # line breaks after the cursor inside the suffix window


def snippet_path(uri: str) -> str:
    """A short, stable path for the `<|file|>` header: the file name and its parent folder. A URI
    urlparse rejects (`file://[bad/x.py`: an unclosed IPv6 authority) is read as a plain path."""
    try:
        path = urlparse(uri).path
    except ValueError:
        path = uri.split("://", 1)[-1]
    parts = PurePosixPath(unquote(path)).parts
    return "/".join(parts[-2:]) if parts else uri


class ContextBuilder:
    def __init__(self, tokenizer: Tokenizer, prefix_tokens: int, suffix_tokens: int,
                 snippet_tokens: int, snippet_files: int):
        self.tok = tokenizer
        self.prefix_tokens = prefix_tokens
        self.suffix_tokens = suffix_tokens
        self.snippet_tokens = snippet_tokens
        self.snippet_files = snippet_files
        self._windows: dict[str, _Window] = {}

    def __len__(self) -> int:
        """Documents with a held window."""
        return len(self._windows)

    def forget(self, uri: str) -> None:
        self._windows.pop(uri, None)

    def build(self, doc: Document, offset: int, others: list[Document]) -> Context:
        window = self._windows.setdefault(doc.uri, _Window())
        line = doc.line_of(offset)
        prefix, prefix_ids = self._prefix(doc, offset, line, window)
        suffix, suffix_ids = self._suffix(doc, offset, line, window)
        return Context(prefix, suffix, self._snippets(others), prefix_ids, suffix_ids, self.snippet_tokens)

    def _fitting(self, text: str, budget: int, at_edge: bool) -> list[int] | None:
        """The ids of a held window that may stay: within budget, and not shrunk far below it unless
        it already reaches the start or end of the document; None if it must be recut."""
        if len(text) > budget * CHARS_PER_TOKEN:
            return None
        ids = self.tok.encode_cached(text)
        n = len(ids)
        return ids if n <= budget and (at_edge or n >= LOW * budget) else None

    def _sent(self, text: str, ids: list[int] | None = None) -> list[int]:
        """The ids the engine is sent for a window: those of its text with LF line breaks (`ids`, those
        of `text` itself, where it has them and has no CR)."""
        if ids is not None and "\r" not in text:
            return ids
        return self.tok.encode_cached(to_lf(text))

    def _prefix(self, doc: Document, offset: int, line: int, window: _Window) -> tuple[str, list[int]]:
        budget = self.prefix_tokens
        if window.prefix_line is not None and window.prefix_line <= line:
            held = doc.text[doc.line_start(window.prefix_line):offset]
            ids = self._fitting(held, budget, at_edge=window.prefix_line == 0)
            if ids is not None:
                return held, self._sent(held, ids)
        target = int(budget * TARGET)
        lo = max(0, offset - target * CHARS_PER_TOKEN - 1)
        cut = cut_prefix(self.tok, doc.text[lo:offset], target)
        start = offset - len(cut)
        aligned = start == doc.line_start(doc.line_of(start))
        window.prefix_line = doc.line_of(start) if aligned else None
        return cut, self._sent(cut)

    def _suffix(self, doc: Document, offset: int, line: int, window: _Window) -> tuple[str, list[int]]:
        budget = self.suffix_tokens
        if window.suffix_lines is not None:
            end = doc.line_start(line + window.suffix_lines)
            held = doc.text[offset:end]
            ids = self._fitting(held, budget, at_edge=end == len(doc.text)) if end >= offset else None
            if ids is not None:
                return held, self._sent(held, ids)
        target = int(budget * TARGET)
        cut = cut_suffix(self.tok, doc.text[offset:offset + target * CHARS_PER_TOKEN + 1], target)
        end = offset + len(cut)
        breaks = len(LINE_BREAK.findall(cut))
        if end == len(doc.text):
            window.suffix_lines = breaks + 1
        elif end == doc.line_start(doc.line_of(end)) and breaks:
            window.suffix_lines = breaks
        else:
            window.suffix_lines = None    # the cursor line alone overflows the budget
        return cut, self._sent(cut)

    def _snippets(self, others: list[Document]) -> list[Snippet]:
        snippets = []
        for other in others[:self.snippet_files]:
            start = other.line_start(max(0, other.line_of(other.last_edit) - SNIPPET_LEAD_LINES))
            text = other.text[start:start + self.snippet_tokens * CHARS_PER_TOKEN]
            if text.strip():
                snippets.append(Snippet(snippet_path(other.uri), to_lf(text)))     # as the model was trained
        return snippets
