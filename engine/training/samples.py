"""Training examples from realistic cursor positions (DESIGN §4).

A cursor is placed in a training file the way a user meets it, and the text is split into
prefix / middle / suffix:

* `line_rest`  — cursor inside a line, middle = rest of that line (single-line completion)
* `lines`      — cursor after the indentation of a line, middle = 1..4 whole lines (multi-line)
* `line_start` — cursor at column 0 of a line, middle = 1..4 whole lines with their indentation and
                 line break (top-level code; and how infilling benchmarks cut a line out)
* `chars`      — a random character span anywhere (robustness)

Windows are cut by `prompt.context_ids`, exactly as the server cuts them. Each example carries the
causal context ids and the span target `middle + <|eom|>` (truncated to L, no <|eom|> if longer).
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from .corpus import CorpusFile
from ..decoding.prompt import Budget, Snippet, context_ids
from ..core.tokenizer import Tokenizer

KINDS = (("line_rest", 0.45), ("lines", 0.25), ("line_start", 0.15), ("chars", 0.15))


@dataclass
class Cut:
    prefix: str
    middle: str
    suffix: str
    kind: str


@dataclass
class Example:
    context: list[int]   # causal context ending in <|middle|>
    target: list[int]    # middle tokens + <|eom|>, at most L tokens
    kind: str


def _line_starts(text: str) -> list[int]:
    starts = [0]
    pos = text.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = text.find("\n", pos + 1)
    return starts


def cut_line_rest(text: str, rng: random.Random) -> Cut | None:
    starts = _line_starts(text)
    for _ in range(8):
        i = rng.randrange(len(starts))
        a = starts[i]
        b = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
        line = text[a:b]
        body = len(line) - len(line.lstrip())
        if len(line.strip()) < 2:
            continue
        cursor = a + rng.randint(body, len(line.rstrip()) - 1)
        middle = text[cursor:b].rstrip(" \t\r")
        return Cut(text[:cursor], middle, text[cursor + len(middle):], "line_rest")
    return None


def _pick_lines(text: str, rng: random.Random, max_lines: int, end_with_break: bool) -> tuple[list[int], int, int] | None:
    """1..max_lines whole lines whose first line is not blank: (line starts, first line, count).
    end_with_break: the last line must have its line break (not the file's unterminated last line)."""
    starts = _line_starts(text)
    for _ in range(8):
        i = rng.randrange(len(starts))
        k = rng.randint(1, max_lines)
        if i + k > len(starts) - end_with_break:
            continue
        first_end = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
        if not text[starts[i]:first_end].strip():
            continue
        return starts, i, k
    return None


def cut_lines(text: str, rng: random.Random, max_lines: int = 4) -> Cut | None:
    picked = _pick_lines(text, rng, max_lines, end_with_break=False)
    if picked is None:
        return None
    starts, i, k = picked
    a = starts[i]
    line_end = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
    indent = len(text[a:line_end]) - len(text[a:line_end].lstrip())
    end = starts[i + k] - 1 if i + k < len(starts) else len(text)
    return Cut(text[:a + indent], text[a + indent:end], text[end:], "lines")


def cut_line_start(text: str, rng: random.Random, max_lines: int = 4) -> Cut | None:
    picked = _pick_lines(text, rng, max_lines, end_with_break=True)
    if picked is None:
        return None
    starts, i, k = picked
    a, end = starts[i], starts[i + k]
    return Cut(text[:a], text[a:end], text[end:], "line_start")


def cut_chars(text: str, rng: random.Random) -> Cut | None:
    if len(text) < 4:
        return None
    a = rng.randrange(len(text) - 1)
    b = min(len(text), a + rng.randint(1, 120))
    return Cut(text[:a], text[a:b], text[b:], "chars")


CUTTERS = {"line_rest": cut_line_rest, "lines": cut_lines, "line_start": cut_line_start, "chars": cut_chars}


def random_cut(text: str, rng: random.Random) -> Cut | None:
    kind = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
    return CUTTERS[kind](text, rng)


def make_example(tok: Tokenizer, cut: Cut, span_length: int, budget: Budget,
                 snippets: list[Snippet] | None = None) -> Example:
    target = tok.encode(cut.middle) + [tok.special.eom]
    return Example(context_ids(tok, cut.prefix, cut.suffix, snippets, budget), target[:span_length], cut.kind)


class ExampleStream:
    """Endless stream of examples from a list of files; files are drawn in proportion to their size
    so every byte of the corpus is equally likely to hold the cursor."""

    def __init__(self, tok: Tokenizer, files: list[CorpusFile], budget: Budget, seed: int = 0,
                 snippet_prob: float = 0.25):
        self.tok, self.files, self.budget = tok, files, budget
        self.rng = random.Random(seed)
        self.cum_weights = list(itertools.accumulate(len(f.text) for f in files))
        self.snippet_prob = snippet_prob
        self.by_dir: dict[str, list[int]] = {}
        for i, f in enumerate(files):
            self.by_dir.setdefault(f.path.rsplit("/", 1)[0], []).append(i)

    def _snippets(self, index: int) -> list[Snippet]:
        if self.rng.random() >= self.snippet_prob:
            return []
        siblings = [j for j in self.by_dir[self.files[index].path.rsplit("/", 1)[0]] if j != index]
        if not siblings:
            return []
        other = self.files[self.rng.choice(siblings)]
        return [Snippet(other.path, other.text[:4000])]

    def next(self, span_length: int) -> Example:
        while True:
            index = self.rng.choices(range(len(self.files)), cum_weights=self.cum_weights)[0]
            cut = random_cut(self.files[index].text, self.rng)
            if cut is not None and cut.middle:
                return make_example(self.tok, cut, span_length, self.budget, self._snippets(index))
