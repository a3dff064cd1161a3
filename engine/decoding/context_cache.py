"""Exact context KV cache with a small LRU (one entry per recently used context, e.g. open files).

The context is encoded causally, so the keys/values of its first k tokens depend only on those k
tokens. A new request therefore reuses the longest common token prefix with the best entry and
encodes only the rest; while the user types at the cursor that is the last few tokens of the prefix.
Buffers are preallocated with room for the context plus a span, so the AR baseline can use the
positions after the context as scratch without invalidating the entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..core.family import ModelFamily

MIN_SHARED_TO_REUSE = 16   # below this, taking over an entry would evict another file's context for little gain
CAPACITY_ROUND = 128


def common_prefix_len(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


@dataclass(eq=False)
class CacheEntry:
    kv: list[tuple[torch.Tensor, torch.Tensor]]   # per layer, each [1, H, capacity, Dh]
    tokens: list[int] = field(default_factory=list)
    last_hidden: torch.Tensor | None = None       # hidden state at position len(tokens)-1

    @property
    def capacity(self) -> int:
        return self.kv[0][0].shape[2] if self.kv else 0


@dataclass
class Lookup:
    entry: CacheEntry
    reused: int
    encoded: int


class ContextCache:
    def __init__(self, model: ModelFamily, max_entries: int = 4):
        self.model = model
        self.max_entries = max_entries
        self.entries: list[CacheEntry] = []          # most recently used last
        self.requests = self.reused_tokens = self.encoded_tokens = 0

    def allocate(self, capacity: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Buffers for at least `capacity` positions, rounded up so a growing context rarely reallocates."""
        return self.model.allocate_kv(-(-capacity // CAPACITY_ROUND) * CAPACITY_ROUND)

    def _choose(self, tokens: list[int]) -> tuple[CacheEntry, int]:
        best, shared = None, 0
        for entry in self.entries:
            n = common_prefix_len(entry.tokens, tokens)
            if best is None or n > shared:
                best, shared = entry, n
        if best is not None and (shared >= MIN_SHARED_TO_REUSE or shared == len(tokens)):
            return best, shared
        if len(self.entries) < self.max_entries:
            entry = CacheEntry(kv=[])
            self.entries.append(entry)
            return entry, 0
        return self.entries[0], common_prefix_len(self.entries[0].tokens, tokens)   # least recently used

    def prepare(self, tokens: list[int], room_after: int, need_hidden: bool = False, encode=None) -> Lookup:
        """Make an entry hold exactly `tokens` with `room_after` scratch positions; encode what is missing
        with encode(tokens, start, kv) -> last hidden (the model's `encode_context` by default)."""
        if not tokens:
            raise ValueError("context must hold at least one token")
        entry, shared = self._choose(tokens)
        if need_hidden and shared == len(tokens) and (entry.last_hidden is None or len(entry.tokens) != shared):
            shared -= 1   # re-encode the last token to recover its hidden state
        needed = len(tokens) + room_after
        if entry.capacity < needed:
            old = entry.kv
            entry.kv = self.allocate(needed)
            for (k_new, v_new), (k_old, v_old) in zip(entry.kv, old):
                k_new[:, :, :shared] = k_old[:, :, :shared]
                v_new[:, :, :shared] = v_old[:, :, :shared]
        if shared < len(tokens):
            new = torch.tensor([tokens[shared:]], dtype=torch.long, device=self.model.embed.weight.device)
            entry.last_hidden = (encode or self.model.encode_context)(new, shared, entry.kv)
        elif len(entry.tokens) != shared:
            entry.last_hidden = None
        entry.tokens = list(tokens)
        self.entries.remove(entry)
        self.entries.append(entry)
        self.requests += 1
        self.reused_tokens += shared
        self.encoded_tokens += len(tokens) - shared
        return Lookup(entry, shared, len(tokens) - shared)

    def clear(self) -> None:
        self.entries.clear()

    @property
    def stats(self) -> dict:
        total = self.reused_tokens + self.encoded_tokens
        return {"requests": self.requests, "reused_tokens": self.reused_tokens,
                "encoded_tokens": self.encoded_tokens, "reuse_rate": self.reused_tokens / total if total else 0.0,
                "entries": len(self.entries)}
