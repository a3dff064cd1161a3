"""Typing-through cache: answer from the last suggestion while the user types what it proposed.

After a suggestion `return a + b` is shown at `|`, typing `ret` makes the editor ask again at the
new cursor. If the text around the cursor is what the model saw (same prefix window before the
typed characters, same suffix window after the cursor) and the typed characters are the start of
a cached candidate, the answer is the rest of that candidate (`urn a + b`), with no engine call.
"""
from __future__ import annotations

from dataclasses import dataclass


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
        hit too: the user has typed a whole suggestion, and there is nothing left to propose. A
        request that wants several candidates (an invocation) misses where the engine was asked for
        fewer, or where nothing is left: the user asked for suggestions. A suggestion from another
        `source` (another model, other settings) misses."""
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
        return left if left or wanted == 1 else None
