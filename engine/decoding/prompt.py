"""Context assembly: cut prefix/suffix windows on line boundaries within a token budget and lay out
the causal context stream of DESIGN §3:

    [<|file|> path\\n snippet]*  <|suffix|> S  <|prefix|> P  <|middle|>

Training (`training/samples.py`) and the server's context builder both call these functions, so the model is
trained on exactly the windows it will be served.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.tokenizer import Tokenizer

# LSP's line breaks: \n, \r\n and a lone \r (str.splitlines also breaks at \x0b, \x0c, \x1c-\x1e, \x85,
# \u2028 and \u2029, inside what LSP and an editor count as one line); the server's documents use it too
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_pieces(text: str) -> list[str]:
    """`text`'s lines, each with its line break (the last without one, where the text does not end with
    one); no empty last piece."""
    ends = [m.end() for m in LINE_BREAK.finditer(text)]
    lines = [text[a:b] for a, b in zip([0] + ends, ends + [len(text)])]
    return lines[:-1] if lines and not lines[-1] else lines


@dataclass(frozen=True)
class Snippet:
    path: str
    text: str


@dataclass(frozen=True)
class Budget:
    prefix_tokens: int = 320
    suffix_tokens: int = 96
    snippet_tokens: int = 96

    @property
    def total(self) -> int:  # + the special tokens and snippet headers
        return self.prefix_tokens + self.suffix_tokens + self.snippet_tokens + 8

    @classmethod
    def scaled(cls, total_tokens: int) -> "Budget":
        """The trained split of the context budget (prefix/suffix/snippets), scaled so that its total,
        the special tokens included, is at most total_tokens."""
        default = cls()
        scale = max(0, total_tokens - (default.total - default.text_tokens)) / default.text_tokens
        return cls(int(default.prefix_tokens * scale), int(default.suffix_tokens * scale),
                   int(default.snippet_tokens * scale))

    def within(self, total_tokens: int) -> "Budget":
        """This budget where its total fits total_tokens, else the trained split scaled to them."""
        return self if self.total <= total_tokens else Budget.scaled(total_tokens)

    @property
    def text_tokens(self) -> int:
        return self.prefix_tokens + self.suffix_tokens + self.snippet_tokens


def cut_prefix(tok: Tokenizer, prefix: str, budget: int) -> str:
    """Keep the longest tail of `prefix` that starts at a line start and fits `budget` tokens.
    The cursor line's own text is always kept (truncated from the left only if it alone is too long)."""
    if budget <= 0:      # prefix[-0:] and ids[-0:] would keep everything
        return ""
    scan = prefix[-budget * 8:] if len(prefix) > budget * 8 else prefix  # no line is cheaper than ~1 token/8 chars
    lines = line_pieces(scan)
    if len(scan) < len(prefix) and lines:
        lines = lines[1:] or lines  # the first scanned line may be cut mid-line
    counts = tok.line_counts(lines)     # memoised: between keystrokes only the cursor's line is new
    used, keep = 0, 0
    for n in reversed(counts):
        if used + n > budget:
            break
        used += n
        keep += 1
    if keep == 0 and lines:
        ids = tok.encode(lines[-1])[-budget:]
        return tok.decode(ids)
    return "".join(lines[len(lines) - keep:])


def cut_suffix(tok: Tokenizer, suffix: str, budget: int) -> str:
    """Keep the longest head of `suffix` that ends at a line end and fits `budget` tokens; the rest of
    the cursor line is always kept (truncated on the right if it alone is too long)."""
    scan = suffix[:budget * 8]
    lines = line_pieces(scan)
    if len(scan) < len(suffix) and len(lines) > 1:
        lines = lines[:-1]
    counts = tok.line_counts(lines)     # memoised: between keystrokes only the cursor's line is new
    used, keep = 0, 0
    for n in counts:
        if used + n > budget:
            break
        used += n
        keep += 1
    if keep == 0 and lines:
        return tok.decode(tok.encode(lines[0])[:budget])
    return "".join(lines[:keep])


def cut_windows(tok: Tokenizer, prefix: str, suffix: str, budget: Budget) -> tuple[str, str]:
    """The prefix and suffix windows `budget` holds: the prefix's tail, the suffix's head (cut_prefix,
    cut_suffix)."""
    return cut_prefix(tok, prefix, budget.prefix_tokens), cut_suffix(tok, suffix, budget.suffix_tokens)


def snippet_ids(tok: Tokenizer, snippets: list[Snippet], budget: int) -> list[int]:
    """`<|file|>` path, newline, text for each snippet in order, while `budget` tokens last."""
    ids: list[int] = []
    for snip in snippets:
        head = tok.encode(snip.path + "\n")
        room = budget - len(ids) - 1 - len(head)
        if room <= 8:
            break
        body = tok.encode(cut_suffix(tok, snip.text, room))
        ids += [tok.special.file] + head + body
    return ids


def check_window_ids(cut: bool, prefix_ids: list[int] | None, suffix_ids: list[int] | None) -> None:
    """Window ids are those of windows the caller cut: ValueError with cut=True."""
    if cut and (prefix_ids is not None or suffix_ids is not None):
        raise ValueError("prefix_ids/suffix_ids are the ids of windows already cut; pass them with cut=False")


def context_ids(tok: Tokenizer, prefix: str, suffix: str, snippets: list[Snippet] | None = None,
                budget: Budget = Budget(), cut: bool = True,
                prefix_ids: list[int] | None = None, suffix_ids: list[int] | None = None) -> list[int]:
    """The token stream of the context. With cut=False the caller has already chosen the windows,
    and may pass their ids too (`tok.encode` of exactly `prefix` and `suffix`): they are not encoded
    again."""
    check_window_ids(cut, prefix_ids, suffix_ids)
    if cut:
        prefix, suffix = cut_windows(tok, prefix, suffix, budget)
    prefix_ids = tok.encode(prefix) if prefix_ids is None else prefix_ids
    suffix_ids = tok.encode(suffix) if suffix_ids is None else suffix_ids
    sp = tok.special
    return (snippet_ids(tok, snippets or [], budget.snippet_tokens)
            + [sp.suffix] + suffix_ids + [sp.prefix] + prefix_ids + [sp.middle])
