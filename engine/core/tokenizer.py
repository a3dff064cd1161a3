r"""Byte-level BPE tokenizer for code with named special tokens.

Text is always encoded with special-token matching switched off, so a file that happens to contain
"<|eom|>" cannot inject control tokens; special ids are inserted by name. Decoding goes through an
exact token -> bytes table, so any token sequence maps to bytes and text round-trips exactly (tabs,
CRLF, emoji), and a span cut in the middle of a UTF-8 character never produces replacement garbage.

`encode_cached` gives `encode`'s ids from memoised *line pieces*. BPE merges never cross a
pre-token, and GPT-2's byte-level regex (`'s|'t|…| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`)
always starts a pre-token at the last whitespace character before a non-whitespace one: no
alternative takes whitespace after non-whitespace, `\s+(?!\S)` stops a longer run one short, and
that last character is then a pre-token alone or the space of ` ?\p{L}+` and its kin. Cut there,
each part pre-tokenizes alone as inside the whole text (the regex has no look-behind, and the run
that ends a part is taken whole by `\s+(?!\S)` at the end of a string), so encode(text) is the
concatenation of the parts' ids. Cutting only at runs holding a line break gives pieces of about
a line, which recur from keystroke to keystroke. Cutting *at* the non-whitespace character would
not do: `a\n\n` alone ends in one pre-token (`\n\n`), inside `a\n\nb` the run is two.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Generic, Iterable, Iterator, TypeVar

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = ("<|pad|>", "<|mask|>", "<|eom|>", "<|file|>", "<|suffix|>", "<|prefix|>", "<|middle|>")
LINE_ENTRIES = 50_000      # lines whose token count is remembered before the memo starts afresh (a few MB)
PIECE_ENTRIES = 10_000     # line pieces whose ids are remembered (~650 bytes each): windows of many documents

# what `\s` matches in the byte-level regex (Oniguruma's Unicode classes): Python's `\s` less \x1c-\x1f
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
LINE_BREAK_RUN = re.compile(f"[\r\n][{WHITESPACE}]*")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte <-> printable-unicode map used by the ByteLevel pre-tokenizer."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


UNICODE_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}


@dataclass(frozen=True)
class SpecialIds:
    pad: int
    mask: int
    eom: int
    file: int
    suffix: int
    prefix: int
    middle: int


V = TypeVar("V")


class TextMemo(Generic[V]):
    """Values by text, the missing ones computed in one batch; emptied once it outgrows its limit.
    A lookup reads the memo once into a local dict, so another thread emptying it loses nothing."""

    def __init__(self, compute: Callable[[list[str]], list[V]], limit: int):
        self._compute, self._limit = compute, limit
        self._values: dict[str, V] = {}

    def __len__(self) -> int:
        return len(self._values)

    def __call__(self, texts: list[str]) -> list[V]:
        values = self._values
        known = {text: values.get(text) for text in texts}
        new = [text for text, value in known.items() if value is None]
        if new:
            fresh = dict(zip(new, self._compute(new)))
            known.update(fresh)
            if len(values) + len(fresh) > self._limit:
                values.clear()
            values.update(fresh)
        return [known[text] for text in texts]


def line_pieces(text: str) -> list[str]:
    """`text` cut before the last whitespace character ahead of each line's first non-whitespace one
    (the module docstring says why the byte-level regex starts a pre-token there)."""
    cuts = [m.end() - 1 for m in LINE_BREAK_RUN.finditer(text) if m.end() < len(text)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def splits_like_gpt2(hf: HFTokenizer) -> bool:
    """Whether encoding is GPT-2's byte-level regex then a model per pre-token and nothing else (no
    normalizer, no added tokens matched in text, no truncation): what `line_pieces` is exact for."""
    pre = hf.pre_tokenizer
    return (isinstance(pre, pre_tokenizers.ByteLevel) and pre.use_regex and not pre.add_prefix_space
            and hf.normalizer is None and hf.truncation is None and hf.padding is None
            and isinstance(hf.model, models.BPE) and hf.model.dropout is None and hf.encode_special_tokens
            and all(token.special for token in hf.get_added_tokens_decoder().values()))


# a lone surrogate (JSON's "\ud800" reaches Python as one) has no UTF-8 form, and `tokenizers` refuses
# the whole text; U+FFFD stands in for it, one character for one, so offsets into the text still hold
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    return LONE_SURROGATE.sub("\ufffd", text)


class BPECodec:
    """What every tokenizer here shares (the spanfill one below, a public checkpoint's in families/):
    a `tokenizers` BPE that never matches special tokens in text, the per-line token-count memo that
    window cutting (decoding/prompt.py) reads, and the line-piece memo behind `encode_cached`."""

    def __init__(self, hf: HFTokenizer):
        self.hf = hf
        self.hf.encode_special_tokens = True
        self.vocab_size = hf.get_vocab_size()
        self.line_counts = TextMemo(lambda lines: [len(ids) for ids in self.encode_batch(lines)], LINE_ENTRIES)
        # None where line pieces are not exact: encode_cached then encodes whole
        self.piece_ids = TextMemo(self.encode_batch, PIECE_ENTRIES) if splits_like_gpt2(hf) else None

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return self.hf.encode(encodable(text), add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.hf.encode_batch([encodable(t) for t in texts], add_special_tokens=False)]

    def encode_cached(self, text: str) -> list[int]:
        """`encode(text)`, exactly, from memoised line pieces: between keystrokes only the cursor's
        piece is new. A tokenizer that does not split like GPT-2 (`splits_like_gpt2`) encodes whole."""
        if self.piece_ids is None or not text:
            return self.encode(text)
        return [tid for ids in self.piece_ids(line_pieces(text)) for tid in ids]


class Tokenizer(BPECodec):
    def __init__(self, hf: HFTokenizer):
        super().__init__(hf)
        ids = {}
        for name in SPECIAL_TOKENS:
            tid = hf.token_to_id(name)
            if tid is None:
                raise ValueError(f"tokenizer has no special token {name!r}; was it trained by spanfill?")
            ids[name.strip("<|>")] = tid
        self.special = SpecialIds(**ids)
        self._token_bytes: list[bytes] = [b""] * self.vocab_size
        special_ids = set(ids.values())
        for token, tid in hf.get_vocab().items():
            if tid in special_ids:
                continue  # control tokens carry no text
            self._token_bytes[tid] = bytes(UNICODE_TO_BYTE[c] for c in token)

    @classmethod
    def from_file(cls, path: str | Path) -> "Tokenizer":
        return cls(HFTokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> None:
        self.hf.save(str(path))

    def token_bytes(self, tid: int) -> bytes:
        return self._token_bytes[tid]

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        table = self._token_bytes
        return b"".join(table[i] for i in ids if 0 <= i < len(table))

    def decode(self, ids: Iterable[int]) -> str:
        """Exact inverse of encode; an incomplete trailing UTF-8 sequence is dropped, not replaced."""
        data = self.decode_bytes(ids)
        text = data.decode("utf-8", errors="ignore")
        return text


def train_tokenizer(texts: Iterator[str], vocab_size: int) -> Tokenizer:
    """Train a byte-level BPE on `texts` (the training split only)."""
    hf = HFTokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    return Tokenizer(hf)
