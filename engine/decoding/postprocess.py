"""Post-processing: turn the engine's raw middle into editor-ready insert text, or nothing.

Each rule is one function over `(text, Cursor)`; `finish` applies them in order:

1. line policy      single-line when the cursor has text after it on its line (or sits at the end
                    of a line that opens no block); multi-line at an empty line or after a block
                    opener (`:`, `{`, `(`, `[`, `=>`). At the start of a line's code (column 0, or
                    just after its indentation), a candidate that breaks the line inserts whole
                    lines above it: it is finished as at a blank line above that line, and shown
                    with its line break and the line's indentation (`at_line_start`); in a Python
                    document those lines must be Python above the line they move down
2. suffix overlap   drop the tail that repeats the text right after the cursor
3. brackets         never close a bracket that the suffix already closes
4. indentation      no deeper than the block at an empty line, stop where a line leaves the
                    block, and the document's tabs-or-spaces style
5. Python           in a Python document, only what can be Python where it stands: the longest run
                    of leading whole lines that can, or nothing; and nothing after a `return`,
                    `raise`, `continue` or `break` at its indentation, which never runs (pysyntax.py)
6. rejection        nothing rather than whitespace or a copy of the lines that follow

All text here uses `\\n`; the caller converts to the document's line ending at the very end.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .pysyntax import CLOSERS, OPENERS, cut_unreachable, followed_by_line, keep_python

BLOCK_OPENERS = (":", "{", "(", "[", "=>")
QUOTES = "\"'`"
INDENT_UNIT = 4
OVERLAP_SCAN = 512            # longest repeated tail looked for, in characters
# at a multi-line cursor of a Python document, a diffusion candidate whose shown text keeps less than
# this share of what it wrote (non-blank characters; the rules cut the rest, mostly the Python gate) is
# not worth showing over AR's (`Shown.would_show`): the AR fallback decodes again. 1.0: any of it cut,
# by any rule (a body that also repeats the suffix's next line included). Over four held-out splits'
# multi-line tasks, the higher the share the more requests fall back (about half at 1.0) and the higher
# the edit similarity and length as shown, at the same exact match (benchmarks/fallback_share.py)
MIN_SHOWN_SHARE = 1.0


@dataclass(frozen=True)
class Cursor:
    before: str               # text before the cursor, from a line start (the prefix window)
    after: str                # text after the cursor (the suffix window)
    above: str = ""           # the document before `before`, where that is a window of it: read by the
                              # Python gate alone, for the strings and brackets open where the window starts

    @property
    def line_before(self) -> str:
        return self.before.rsplit("\n", 1)[-1]

    @property
    def line_after(self) -> str:
        return self.after.split("\n", 1)[0]

    @property
    def lines_below(self) -> list[str]:
        return self.after.split("\n")[1:]


def to_lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def indent_of(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def width(indent: str) -> int:
    return len(indent.expandtabs(INDENT_UNIT))


def wants_multiline(cur: Cursor) -> bool:
    if cur.line_after.strip():
        return False
    head = cur.line_before.rstrip()
    return not head.strip() or head.endswith(BLOCK_OPENERS)


def at_line_start(cur: Cursor) -> bool:
    """The cursor is at the start of a line's code, at column 0 or just after the line's indentation
    (where Home and Vim's `I` put it): where the model writes a line break, its middle is whole lines
    inserted above that line (training's `line_start` cuts; line-level infilling)."""
    return not cur.line_before.strip() and bool(cur.line_after.strip())


def apply_line_policy(text: str, cur: Cursor) -> str:
    return text if wants_multiline(cur) else text.split("\n", 1)[0]


def trim_suffix_overlap(text: str, cur: Cursor) -> str:
    """`foo(|)` + `a, b)` -> `a, b`: drop the longest tail of `text` that the suffix starts with, but
    never a closer of a bracket the text opened itself: at `sum(|)`, `len(items)` ends as the suffix
    starts and repeats nothing."""
    pairs = None
    for k in range(min(len(text), len(cur.after), OVERLAP_SCAN), 0, -1):
        if text.endswith(cur.after[:k]):
            if pairs is None:
                pairs = brackets(text).pairs
            cut = len(text) - k     # no cut between a bracket the text keeps and the closer it matches it with
            if not any(opener < cut <= closer for opener, closer in pairs):
                return text[:cut]
    return text


def _brackets(text: str):
    """Yield (index, char) for brackets outside single-line string literals."""
    quote = None
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote or ch == "\n":
                quote = None
        elif ch in QUOTES:
            quote = ch
        elif ch in OPENERS or ch in CLOSERS:
            yield i, ch


@dataclass(frozen=True)
class Brackets:
    """How `text`'s brackets match (strings aside): the pairs it opens and closes itself (opener's
    index, closer's index), the closers it leaves unmatched (index, char) and the openers it leaves
    open (indices, innermost last)."""
    pairs: list[tuple[int, int]]
    unmatched_closers: list[tuple[int, str]]
    open: list[int]


def brackets(text: str) -> Brackets:
    stack: list[tuple[int, str]] = []
    pairs, unmatched = [], []
    for i, ch in _brackets(text):
        if ch in OPENERS:
            stack.append((i, ch))
        elif stack and stack[-1][1] == CLOSERS[ch]:
            pairs.append((stack.pop()[0], i))
        else:
            unmatched.append((i, ch))
    return Brackets(pairs, unmatched, [i for i, _ in stack])


def drop_closed_brackets(text: str, cur: Cursor) -> str:
    """Cut the completion at its first bracket that closes something opened before the cursor
    when the suffix (rest of the line and the next line) closes that same bracket. A closer that
    starts the next line closes the bracket opened on a line indented as it is: less indented than
    the line of the innermost bracket open before the cursor, it closes an outer one
    (`print(\n    len(|` above `)`), and the completion's closer is the inner one's."""
    nearby = "\n".join(cur.after.split("\n")[:2])
    found = brackets(nearby).unmatched_closers
    pending = [ch for _, ch in found]
    if not pending:
        return text
    if found[0][0] > len(cur.line_after):           # on the next line
        below = nearby[len(cur.line_after) + 1:]
        opened = brackets(cur.before).open
        if (opened and not below[:found[0][0] - len(cur.line_after) - 1].strip()
                and width(indent_of(below)) < width(indent_of(cur.before[:opened[-1]].rsplit("\n", 1)[-1]))):
            return text
    closers = brackets(text).unmatched_closers
    if closers and closers[0][1] == pending[0]:
        return text[:closers[0][0]].rstrip()
    return text


def indentation(cur: Cursor) -> tuple[bool, int]:
    """How the code around the cursor (both windows) indents: (with tabs: most of its indented lines
    start with one; the step: the commonest by which a line indents deeper than a line that opens a
    statement block, `:` or `{`, INDENT_UNIT where none does). A bracket's continuation lines may be
    aligned or hang deeper (PEP 8's `def f(` + 8), and a line under a `/*` comment (` * text`, ` */`) is
    aligned, not indented: neither counts."""
    return _indentation(cur.before, cur.after)


@functools.lru_cache(maxsize=8)     # asked once per AR token of a request (leaves_block): scan the windows once
def _indentation(before: str, after: str) -> tuple[bool, int]:
    tabs = spaces = 0
    steps: dict[int, int] = {}
    opener = None                    # the depth of the line above, where it opens a block
    for line in (before + after).split("\n"):
        if line[:1] == "\t":
            tabs += 1
        if not line.strip() or line.lstrip().startswith("*"):
            continue
        if line[:1] == " ":
            spaces += 1
        depth = width(indent_of(line))
        if opener is not None and depth - opener >= 2:
            steps[depth - opener] = steps.get(depth - opener, 0) + 1
        opener = depth if line.rstrip().endswith((":", "{")) else None
    return tabs > spaces, max(steps, key=lambda step: (steps[step], -step)) if steps else INDENT_UNIT


def _blank_line_indent(cur: Cursor) -> int:
    """Indentation width for a line started at a blank cursor line: what is typed, or one step
    deeper than the line above when that line opens a block."""
    typed = width(cur.line_before)
    for above in reversed(cur.before.split("\n")[:-1]):
        if above.strip():
            deeper = indentation(cur)[1] if above.rstrip().endswith(BLOCK_OPENERS) else 0
            return max(typed, width(indent_of(above)) + deeper)
    return typed


def keep_block_indentation(text: str, cur: Cursor) -> str:
    """At a blank line, drop indentation the model adds beyond the block's; then end the
    completion at the first line that dedents out of the cursor's block; then use the
    document's tabs-or-spaces style."""
    lines = _block_lines(text, cur)
    tabs = indentation(cur)[0]
    return "\n".join(match_indent_style(line, tabs) for line in lines[:_block_end(lines, cur)])


def leaves_block(text: str, cur: Cursor) -> bool:
    """`text` (LF) has reached a line that dedents out of the cursor's block: `keep_block_indentation`
    ends the completion before that line whatever follows it (an AR decoder may stop there; `finish`
    trims a suffix overlap first, which can then find a different tail)."""
    if "\n" not in text:
        return False
    lines = _block_lines(text, cur)
    return _block_end(lines, cur) < len(lines)


def _block_lines(text: str, cur: Cursor) -> list[str]:
    """`text`'s lines without the indentation the model adds beyond the block's at a blank line: the
    first line's excess comes off it, and at column 0 (where the first line's indentation is as
    absolute as the others') off every line, which the model indented from the first as it was."""
    lines = text.split("\n")
    if not cur.line_before.strip():
        first = width(indent_of(lines[0]))
        excess = width(cur.line_before) + first - _blank_line_indent(cur)
        if excess > 0:
            # every line only where the model indented the others from the first (none shallower than it)
            every = not cur.line_before and all(width(indent_of(line)) >= first for line in lines[1:] if line.strip())
            lines = [_dedent(line, excess) if i == 0 or every else line for i, line in enumerate(lines)]
    return lines


def _dedent(line: str, by: int) -> str:
    lead = indent_of(line)
    return lead.expandtabs(INDENT_UNIT)[min(by, width(lead)):] + line[len(lead):]


def _block_end(lines: list[str], cur: Cursor) -> int:
    """The index of the first line after the first that dedents out of the cursor's block (or len(lines))."""
    floor = width(indent_of(cur.line_before + lines[0]))
    for i in range(1, len(lines)):
        if lines[i].strip() and width(indent_of(lines[i])) < floor:
            return i
    return len(lines)


def match_indent_style(line: str, tabs: bool) -> str:
    lead = indent_of(line)
    if not lead:
        return line
    if tabs:
        tabs, spaces = divmod(width(lead), INDENT_UNIT)
        return "\t" * tabs + " " * spaces + line[len(lead):]
    return lead.expandtabs(INDENT_UNIT) + line[len(lead):]


def repeats_following_lines(text: str, cur: Cursor) -> bool:
    """The completed line(s) are a copy of the non-blank lines right below the cursor line, indentation
    and all (a `return None` or `}` one block deeper than the one below is no copy)."""
    lines = (cur.line_before + text + cur.line_after).split("\n")
    if len(lines) > 1 and not text.split("\n", 1)[0].strip():
        lines = lines[1:]    # the cursor line itself is unchanged: compare only the new lines

    def code(lines):
        return [(width(indent_of(line)), line.strip()) for line in lines if line.strip()]
    typed, below = code(lines), code(cur.lines_below)
    return bool(typed) and typed == below[:len(typed)]


def finish(raw: str, cur: Cursor, python: bool = False) -> str | None:
    """The insert text for one raw engine candidate, or None when nothing is worth showing.
    python: the document is Python, and text that cannot be Python is cut or dropped."""
    cur = Cursor(to_lf(cur.before), to_lf(cur.after), to_lf(cur.above))
    raw = to_lf(raw)
    if at_line_start(cur) and "\n" in raw:
        return _lines_above(raw, cur, python)
    text = apply_line_policy(raw, cur)
    text = trim_suffix_overlap(text, cur)
    text = drop_closed_brackets(text, cur)
    if "\n" in text or not cur.line_before.strip():
        text = keep_block_indentation(text, cur)
    text = re.sub(r"[ \t]+(?=\n)", "", text)
    if not cur.line_after.strip():
        text = text.rstrip()
    if python and text.strip():
        text = cut_unreachable(keep_python(text, cur) or "", cur)
    if not text.strip() or repeats_following_lines(text, cur):
        return None
    return text


def _lines_above(raw: str, cur: Cursor, python: bool) -> str | None:
    """At the start of a line's code: whole lines above that line, finished as at a blank line between
    the two, and ended with the line break and indentation that move the line's code below them. In
    Python, only the leading lines that the line below them still follows (a block header above an
    unindented line is an IndentationError)."""
    indent = cur.line_before
    lines = finish(raw, Cursor(cur.before, "\n" + indent + cur.after, cur.above), python)
    if lines is None:
        return None
    kept = lines.split("\n")
    while python and kept and not followed_by_line(kept, cur):
        kept.pop()
    if not "\n".join(kept).strip():
        return None
    return "\n".join(kept).rstrip() + "\n" + indent


class Shown:
    """What an editor shows of a request's raw candidates (`finish`), each finished once: the engine asks
    through `would_show` whether diffusion wrote anything worth showing (none: it decodes again by AR),
    and the answer is built from the same finished texts (the server, `spanfill batch`, the held-out
    scorer)."""

    def __init__(self, cursor: Cursor, python: bool, min_share: float = MIN_SHOWN_SHARE):
        self.cursor, self.python = cursor, python
        # the share applies where it was measured: multi-line cursors of Python documents
        multiline = wants_multiline(Cursor(to_lf(cursor.before), to_lf(cursor.after)))
        self.min_share = min_share if python and multiline else 0.0
        self._done: dict[str, str | None] = {}

    def text(self, raw: str) -> str | None:
        if raw not in self._done:
            self._done[raw] = finish(raw, self.cursor, self.python)
        return self._done[raw]

    def would_show(self, raw: str) -> bool:
        """Whether `raw` shows anything; at a multi-line cursor of a Python document, at least
        `min_share` of its non-blank characters, the rest being what the rules cut (mostly text that
        cannot be Python). Where no candidate would show, the engine's AR fallback decodes again."""
        text = self.text(raw)
        return text is not None and _ink(text) >= self.min_share * _ink(raw)


def _ink(text: str) -> int:
    """Characters that are not whitespace (indentation the rules rewrite does not count)."""
    return len(text) - sum(map(str.isspace, text))
