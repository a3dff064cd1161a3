"""Typing-through cache: answer from the last suggestion while the user types what it proposed.

After a suggestion `return a + b` is shown at `|`, typing `ret` makes the editor ask again at the
new cursor. If the text around the cursor is what the model saw (same prefix window before the
typed characters, same suffix window after the cursor) and the typed characters are the start of
a cached candidate, the answer is the rest of that candidate (`urn a + b`), with no engine call.
Once the whole candidate is typed nothing is left to show, unless it ended on a block opener
(`for item in items:`): there the engine is asked again, for the block's body.
"""
from __future__ import annotations

from dataclasses import dataclass

from spanfill.engine import Cursor, to_lf, wants_multiline


@dataclass(frozen=True)
class Suggestion:
    offset: int                 # cursor offset when the engine was asked
    tail_len: int               # characters after the cursor then
    prefix: str                 # prefix window the model saw (ends at that cursor)
    suffix: str                 # suffix window the model saw (starts at that cursor)
    texts: tuple[str, ...]      # editor-ready candidates, best first
    asked: int = 1              # candidates the engine was asked for (fewer texts where some were alike)
    source: tuple = ()          # what answered: the engine in service and the settings (completion.py)


class TypingCache:
    def __init__(self) -> None:
        self._last: dict[str, Suggestion] = {}

    def __len__(self) -> int:
        return len(self._last)

    def store(self, uri: str, suggestion: Suggestion) -> None:
        self._last[uri] = suggestion

    def forget(self, uri: str) -> None:
        self._last.pop(uri, None)

    def lookup(self, uri: str, text: str, offset: int, wanted: int = 1, source: tuple = ()) -> list[str] | None:
        """The remaining candidates at `offset` in `text`, or None on a miss. An empty list is a
        hit too: the user has typed a whole suggestion, and there is nothing left to propose, unless
        the cursor now ends a block opener with nothing after it on the line (a miss: the body is
        next). A request that wants several candidates (an invocation) misses where the engine was
        asked for fewer, or where nothing is left: the user asked for suggestions. A suggestion from
        another `source` (another model, other settings) misses."""
        s = self._last.get(uri)
        if s is None or s.asked < wanted or s.source != source:
            return None
        typed_len = offset - s.offset
        if typed_len < 0 or len(text) - offset != s.tail_len:
            return None
        if not text.startswith(s.suffix, offset) or not text.startswith(s.prefix, s.offset - len(s.prefix)):
            return None
        typed = text[s.offset:offset]
        rest = [t[typed_len:] for t in s.texts if t.startswith(typed)]
        if not rest:
            return None
        left = [r for r in rest if r.strip()]
        if not left and (wanted > 1 or _opens_block(text, offset)):
            return None
        return left


def _opens_block(text: str, offset: int) -> bool:
    """Whether the cursor at `offset` ends a line that opens a block (postprocess.wants_multiline at a
    line with code before the cursor and none after it)."""
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    end = min((i for i in (text.find("\n", offset), text.find("\r", offset)) if i >= 0), default=len(text))
    line = Cursor(to_lf(text[start:offset]), to_lf(text[offset:end]))
    return bool(line.before.strip()) and wants_multiline(line)
