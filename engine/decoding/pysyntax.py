"""Is a suggestion Python that could stand where it is shown? `not_python(text, cursor)` is true
only for text that cannot: a statement the completion writes or finishes that Python rejects
(`self..join(`, `if = =`, `,,`), or a closing bracket with nothing to close. It is a gate before
the editor (postprocess.finish, for Python documents): a rejected candidate shows nothing.

Judged from the text alone, as typed so far, so it errs towards accepting:

* A scanner (`scan`) follows strings, comments and brackets through the prefix window, from the state
  the document's text above the window (`Cursor.above`) leaves: a window that starts inside a
  docstring or a long bracketed literal is read as the inside of one. Brackets still open at a line
  that only a statement can start (`def`, `return`, ...) were left unfinished by code being written
  above it, and are dropped there (`recover`). A cursor inside a string or comment, or a cursor line
  that continues an open bracket or string or a line ending in a backslash from above, is not judged
  (the statement starts outside what is known).
* Otherwise the cursor line starts a statement: the line before the cursor, the completion and the
  rest of the line are compiled (`codeop`, so an unfinished statement — an open bracket, a block
  header — counts as fine): inside a loop in an `async def` or a `def` (so that `return`, `await`,
  `yield`, `break` and `continue` are legal) or at module level, whichever takes it, behind an
  `if`/`try` when it starts with `elif`, `else`, `except` or `finally`.

Every line of real Python files passes it (tests/engine/test_pysyntax.py); `spanfill eval` and
benchmarks/length.py score what is shown after it.
"""
from __future__ import annotations

import codeop
import re
import textwrap
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:     # postprocess.py imports this module
    from .postprocess import Cursor

OPENERS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = {v: k for k, v in OPENERS.items()}

# a statement starting with one of these continues a compound statement above it
CONTINUES = {"elif": "if 1:\n    pass\n", "else": "if 1:\n    pass\n", "except": "try:\n    pass\n",
             "finally": "try:\n    pass\n"}
NOT_JUDGED = ("case ", "case(", "nonlocal ", "type ")   # need context the text does not show, or newer syntax


@dataclass
class ScanState:
    brackets: list[str] = field(default_factory=list)   # open brackets, innermost last
    quote: str | None = None                             # the open string's delimiter: ' " ''' or \"\"\"
    comment: bool = False
    unmatched: bool = False                              # a closer met nothing (or the wrong opener)

    @property
    def top_level(self) -> bool:
        return not self.brackets and self.quote is None


INTERESTING = re.compile(r"[\"'#()\[\]{}\\\n]")
# a line that starts with one of these is a statement, never the inside of brackets: brackets still
# open there were left unfinished above it (code being written), and `scan(recover=True)` forgets them
STATEMENT_ONLY = re.compile(r"[ \t]*(?:async[ \t]+def|def|class|return|import|raise|pass|while|try|except|finally|with)\b")


def scan(text: str, state: ScanState | None = None, recover: bool = False) -> ScanState:
    """Follow strings, comments and brackets through `text`, from `state` (a fresh one: outside all).
    recover: brackets open at a line that only a statement can start (STATEMENT_ONLY) are dropped, so
    that one unfinished line does not leave the rest of a document inside brackets."""
    s = state or ScanState()
    if recover:               # `text` starts a line
        _forget_unfinished(s, text, 0)
    i, n = 0, len(text)
    while i < n:
        m = INTERESTING.search(text, i)
        if m is None:
            break
        i = m.start()
        ch = text[i]
        if recover and ch == "\n":
            _forget_unfinished(s, text, i + 1)
        if s.comment:
            if ch == "\n":
                s.comment = False
        elif s.quote:
            if ch == "\\":
                i += 1
            elif text.startswith(s.quote, i):
                i += len(s.quote) - 1
                s.quote = None
            elif ch == "\n" and len(s.quote) == 1:
                s.quote = None       # an unterminated one-line string: Python's error, not ours to follow
        elif ch == "#":
            s.comment = True
        elif ch in "\"'":
            s.quote = ch * 3 if text.startswith(ch * 3, i) else ch
            i += len(s.quote) - 1
        elif ch in OPENERS:
            s.brackets.append(ch)
        elif ch in CLOSERS:
            if s.brackets and s.brackets[-1] == CLOSERS[ch]:
                s.brackets.pop()
            else:
                s.unmatched = True
        i += 1
    return s


def _forget_unfinished(s: ScanState, text: str, line_start: int) -> None:
    if s.brackets and not s.quote and STATEMENT_ONLY.match(text, line_start):
        s.brackets.clear()


def _copy(s: ScanState) -> ScanState:
    return ScanState(list(s.brackets), s.quote, s.comment, s.unmatched)


class StartStates:
    """The scan state at the end of a text (the document above a prefix window), kept for the last few
    texts asked about: a held window's text above it stays the same from keystroke to keystroke, and
    the text above a window moved down extends one already scanned, whose scan goes on from its end.
    Shared by the threads that finish candidates, so one lock guards it."""

    def __init__(self, size: int = 8):
        self.size = size
        self._known: OrderedDict[str, ScanState] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> ScanState:
        if not text:
            return ScanState()
        with self._lock:
            state = self._known.get(text)
            if state is None:
                # only a text ending on a line break is a safe place to go on from (no escape or
                # triple quote straddles it)
                base = max((k for k in self._known if k.endswith("\n") and text.startswith(k)), key=len, default="")
                state = scan(text[len(base):], _copy(self._known[base]) if base else None, recover=True)
                self._known[text] = state
                if len(self._known) > self.size:
                    self._known.popitem(last=False)
            else:
                self._known.move_to_end(text)
            return _copy(state)


start_state = StartStates()


def _line_state(cur: Cursor) -> ScanState | None:
    """The scan state at the start of the cursor's line, or None where that line continues a bracket,
    a string or a backslash-continued line from above."""
    above = cur.before[:len(cur.before) - len(cur.line_before)]
    at_line = scan(above, start_state(cur.above), recover=True)
    _forget_unfinished(at_line, cur.line_before, 0)
    if above.endswith("\\\n") and not scan(above[:-1], start_state(cur.above), recover=True).comment:
        return None               # the line above ends in a backslash: this line continues its statement
    return at_line if at_line.top_level else None


def _cursor_state(cur: Cursor) -> ScanState | None:
    """The scan state at the cursor, or None where the cursor is not judged (inside a string or a
    comment, or on a line that continues a bracket, a string or a backslash-continued line from above)."""
    at_line = _line_state(cur)
    if at_line is None:
        return None
    at_cursor = scan(cur.line_before, at_line)
    if at_cursor.quote or at_cursor.comment or at_cursor.unmatched:
        return None
    return at_cursor


def _judge(text: str, cur: Cursor, at_cursor: ScanState) -> bool:
    if scan(text, _copy(at_cursor)).unmatched:
        return True
    return not _compiles(cur.line_before + text + cur.line_after)


def not_python(text: str, cur: Cursor) -> bool:
    """True where `text` inserted at `cur` cannot be Python (see the module docstring)."""
    at_cursor = _cursor_state(cur)
    return at_cursor is not None and _judge(text, cur, at_cursor)


def keep_python(text: str, cur: Cursor) -> str | None:
    """`text`, or its longest run of leading whole lines that can be Python where it stands; None
    when not even its first line can."""
    at_cursor = _cursor_state(cur)
    if at_cursor is None:
        return text
    lines = text.split("\n")
    for k in range(len(lines), 0, -1):
        kept = "\n".join(lines[:k])
        if k < len(lines) or not cur.line_after.strip():
            kept = kept.rstrip()    # what ends the text before the rest of the line is kept: `not |x` needs its space
        if kept.strip() and not _judge(kept, cur, at_cursor):
            return kept
    return None


CONTINUATION = re.compile(r"(?:elif|else|except|finally)\b")   # a line that goes on with the compound statement above


def _code(line: str, state: ScanState) -> str:
    """`line` without its comment (`#` outside strings, from `state` at its start), right-stripped."""
    for i, ch in enumerate(line):
        if ch == "#":
            at = scan(line[:i], _copy(state))
            if not at.comment and at.quote is None:
                return line[:i].rstrip()
    return line.rstrip()


def _width(line: str) -> int:
    spaced = line.expandtabs(8)              # as Python's tokenizer counts a tab
    return len(spaced) - len(spaced.lstrip())


def followed_by_line(lines: list[str], cur: Cursor) -> bool:
    """Whether the cursor's line still stands after whole `lines` inserted above it (the cursor at the
    start of that line's code: postprocess.at_line_start). The indentation levels open above are
    followed through the prefix window and the inserted lines: an inserted line must dedent to a level
    that is open; the line below must be deeper than a block header the lines end with, else at an
    open level no deeper than their last statement, and an `else`/`elif`/`except`/`finally` below needs
    their last statement deeper than itself (the body of its compound statement). Not judged: a cursor
    the gate does not judge (inside a string, a continued line), lines that leave a bracket, string or
    backslash continuation open, a comment below."""
    at_cursor = _cursor_state(cur)
    below = cur.line_after.lstrip()
    if at_cursor is None or below.startswith("#"):
        return True
    above = cur.before[:len(cur.before) - len(cur.line_before)].split("\n")[:-1]
    placed = [cur.line_before + lines[0], *lines[1:]]      # the first line goes after the cursor's indentation
    state = start_state(cur.above)
    levels: list[int] = []
    header = continued = False
    last = None                                            # the width of the last statement line
    for i, line in enumerate(above + placed):
        inserted = i >= len(above)
        starts = state.top_level and not continued
        code = _code(line, state) if line.strip() else ""
        state = scan(line + "\n", state, recover=not inserted)
        if not code:
            continued = False
            continue
        if starts:                                         # a statement's first line: its indentation counts
            width = _width(line)
            if header and (not levels or width > levels[-1]):
                levels.append(width)
            else:
                while levels and levels[-1] > width:
                    levels.pop()
                if levels and levels[-1] != width and inserted:
                    return False                           # a dedent to no open level
                if not levels or levels[-1] < width:
                    levels.append(width)                   # above the window's first line: levels unknown
            last = width
        continued = code.endswith("\\")
        # a statement that ends on this line (`def f(\n    a,\n):` ends on its last) may open a block
        header = state.top_level and not continued and code.endswith(":")
    if not state.top_level or continued:
        return True
    width = _width(cur.line_before + cur.line_after)
    if header:                                             # (a window that starts inside the header: no width)
        return last is None or width > last
    if CONTINUATION.match(below):
        return last is not None and last > width and (not levels or width in levels or width < levels[0])
    return last is None or (width <= last and (width in levels or not levels or width < levels[0]))


FLOW_END = re.compile(r"[ \t]*(?:return|raise|continue|break)\b")


def cut_unreachable(text: str, cur: Cursor) -> str:
    """`text` without its lines from the first that starts a statement at the indentation of a `return`,
    `raise`, `continue` or `break` above it (outside brackets and strings): Python never runs that
    line, and a model that writes one is repeating itself. A cursor line that continues a bracket or
    string from above is left alone."""
    if "\n" not in text:
        return text
    state = _line_state(cur)
    if state is None:
        return text
    lines = (cur.line_before + text).split("\n")
    ended = None                                    # the indentation width a flow end left
    for i, line in enumerate(lines):
        if state.top_level and line.strip() and not line.lstrip().startswith("#"):
            spaced = line.expandtabs(4)
            indent = len(spaced) - len(spaced.lstrip())
            if ended is not None and indent == ended:
                return "\n".join(lines[:i])[len(cur.line_before):].rstrip()
            if ended is not None and indent < ended:
                ended = None                        # a dedent: another block, run again
            if FLOW_END.match(line):
                ended = indent
        state = scan(line + "\n", state)
    return text


def _compiles(statement: str) -> bool:
    """Whether the statement(s), dedented, compile or are a prefix of code that would."""
    code = textwrap.dedent(statement).strip("\n")
    head = code.lstrip()
    if not head or head.startswith(NOT_JUDGED) or code.rstrip().endswith("\\"):   # a backslash: continued below
        return True
    first = re.match(r"\w*", head).group()      # `except(`, `elif(`, `except*` start with their keyword too
    code = CONTINUES.get(first, "") + code
    # inside a function (return, yield, await, break, continue are legal there), else at module level
    # (`from m import *`); an async one, else a plain one (`yield from`)
    candidates = [f"{header}\n    while 1:\n" + textwrap.indent(code, "        ")
                  for header in ("async def _():", "def _():")] + [code]
    # brackets left open: codeop calls the code unfinished before the parser reaches an earlier error
    # (`if = len(x` is "'(' was never closed"), so they are closed and only an error before the
    # closers counts
    end = scan(code)
    closers = "" if end.quote or end.comment else "".join(OPENERS[b] for b in reversed(end.brackets))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # SyntaxWarning for `is` with a literal, invalid escapes
        return any(_takes(source, closers) for source in candidates)


def _takes(source: str, closers: str) -> bool:
    """Whether Python takes `source` as code or the start of code; with `closers` (the brackets it
    leaves open), whether its only error is where they were appended."""
    try:
        if not closers:
            codeop.compile_command(source + "\n", "<suggestion>", "exec")
            return True
        closed = source + closers
        compile(closed + "\n", "<suggestion>", "exec")
        return True
    except SyntaxError as err:
        if not closers:
            return False
        last = closed.split("\n")
        return err.lineno is not None and (err.lineno > len(last) or (
            err.lineno == len(last) and (err.offset or 0) > len(last[-1]) - len(closers)))
    except (ValueError, OverflowError, RecursionError, MemoryError):   # the last two: nesting past the parser's stack
        return False
