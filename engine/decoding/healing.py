"""Token healing: when the cursor sits inside a word, back the prefix up by its last token and make
the completion's first token start with that token's text.

A cursor in the middle of `self.assertEq|` leaves the prefix ending in a token (`Eq`) that BPE would
never produce there: the whole word is tokenised differently (`Equal`). Conditioning on that split
pushes the model off the distribution it learnt from every context token. So the last prefix token
(the *stub*) is removed from the context, and the span's first position may only take tokens whose
bytes start with the stub's (`Equal`, `Eq`, …); the stub's bytes are then cut off the completion.
(Guidance's "token healing"; the same fix as in llama.cpp's and Tabby's FIM prompts.)

Only stubs without inner whitespace are healed: a whitespace run (the indentation before the cursor)
would need the first token to be a *prefix* of the stub, i.e. a multi-token constraint.

The tokens extending a stub are one run of the vocabulary sorted by bytes, found by bisection: the
stub changes with nearly every keystroke inside a word, and scanning every token's bytes for it cost
more than encoding the whole context.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache

import torch

from ..core.tokenizer import Tokenizer

HEALABLE = re.compile(rb"^ ?[^\s]+$")


@dataclass(frozen=True)
class Healing:
    ids: list[int]              # the context with the stub removed
    stub: bytes                 # b"" when nothing was healed
    first_bias: torch.Tensor | None   # [V] 0 where a token may start the span, -inf elsewhere


class Healer:
    def __init__(self, tokenizer: Tokenizer, device: torch.device | str = "cpu", vocab_size: int | None = None):
        """vocab_size: the model's logits (at least the tokenizer's; a checkpoint may pad its vocabulary)."""
        self.tokenizer = tokenizer
        self.device = device
        self.vocab_size = max(vocab_size or 0, tokenizer.vocab_size)
        order = sorted(range(tokenizer.vocab_size), key=tokenizer.token_bytes)
        self._sorted = [tokenizer.token_bytes(i) for i in order]      # token bytes, ascending
        self._order = torch.tensor(order)                             # their token ids
        self._bias = lru_cache(maxsize=512)(self._make_bias)

    def extending(self, stub: bytes) -> torch.Tensor:
        """The ids of the tokens whose bytes start with `stub`."""
        lo = end = bisect.bisect_left(self._sorted, stub)
        while end < len(self._sorted) and self._sorted[end].startswith(stub):
            end += 1
        return self._order[lo:end]

    def _make_bias(self, stub: bytes) -> torch.Tensor:
        # an inference tensor, whoever asks first: the compiled step is specialised on that
        with torch.inference_mode():
            bias = torch.full((self.vocab_size,), float("-inf"), device=self.device)
            return bias.index_fill_(0, self.extending(stub).to(self.device), 0.0)

    def heal(self, ids: list[int]) -> Healing:
        """ids: a context stream ending `… <|prefix|> P <|middle|>` (prompt.context_ids)."""
        sp = self.tokenizer.special
        if len(ids) < 3 or ids[-1] != sp.middle:
            return Healing(ids, b"", None)
        stub = self.tokenizer.token_bytes(ids[-2])   # b"" for a control token: an empty prefix
        if not HEALABLE.match(stub):
            return Healing(ids, b"", None)
        return Healing(ids[:-2] + [sp.middle], stub, self._bias(stub))

    @staticmethod
    def strip(data: bytes, stub: bytes) -> bytes | None:
        """The completion's bytes without the stub; None if they do not start with it (a span that was
        cancelled or cut by the deadline before its first position was committed)."""
        return data[len(stub):] if data.startswith(stub) else None
