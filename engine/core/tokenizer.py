"""Byte-level BPE tokenizer for code with named special tokens.

Text is always encoded with special-token matching switched off, so a file that happens to contain
"<|eom|>" cannot inject control tokens; special ids are inserted by name. Decoding goes through an
exact token -> bytes table, so any token sequence maps to bytes and text round-trips exactly (tabs,
CRLF, emoji), and a span cut in the middle of a UTF-8 character never produces replacement garbage.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

SPECIAL_TOKENS = ("<|pad|>", "<|mask|>", "<|eom|>", "<|file|>", "<|suffix|>", "<|prefix|>", "<|middle|>")


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


class BPECodec:
    """What every tokenizer here shares (the spanfill one below, a public checkpoint's in families/):
    a `tokenizers` BPE that never matches special tokens in text, and the per-line token-count memo
    that window cutting (decoding/prompt.py) reads."""

    def __init__(self, hf: HFTokenizer):
        self.hf = hf
        self.hf.encode_special_tokens = True
        self.vocab_size = hf.get_vocab_size()
        self.line_counts: dict[str, int] = {}   # prompt.py's memo of tokens per line

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return self.hf.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self.hf.encode_batch(texts, add_special_tokens=False)]


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
