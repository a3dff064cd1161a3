"""Fast-dLLM's dual cache (Wu et al. 2025) for bidirectional diffusion models, and the prefix store
that carries the prefix's keys/values from one keystroke to the next.

A public diffusion model's context is bidirectional: every prefix and suffix token attends to the
span, so no key/value is exact once the span changes. The dual cache takes them from the first
step's full forward (where they *are* exact) and keeps them for the rest of the completion; each
later step runs only on the span's window and attends to the cached context plus the window's own
fresh keys. The approximation is that the context does not see the span's later commits — the
trade Fast-dLLM measured as near-lossless at a large speed-up.

Layout per layer: [B, kv_heads, capacity + W, head_dim] with the context's keys at [0, C) and the
window's at [capacity, capacity + W). capacity = C on the CPU; on CUDA it is C rounded up to a
bucket, so buffers, the mask and a captured graph are reused across completions, and the slots
[C, capacity) are masked out.

The stock attention calls `cache.update(keys, values, layer_idx)` and attends to whatever it
returns; the LLaDA port calls the same method. A full forward gets a `Recorder` there instead.
"""
from __future__ import annotations

import torch

from .common import Shape


class Recorder:
    """Passed as the cache of a full forward: attends to everything and keeps every layer's
    keys/values (with `prefix`'s reused ones, [layers, 1, kvH, r, hd], in front of the input's)."""

    def __init__(self, prefix: tuple[torch.Tensor, torch.Tensor] | None = None):
        self.raw: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.prefix = prefix

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int, *args, **kwargs):
        if self.prefix is not None:
            pk, pv = self.prefix
            k = torch.cat([pk[layer_idx].expand(k.shape[0], -1, -1, -1), k], dim=2)
            v = torch.cat([pv[layer_idx].expand(v.shape[0], -1, -1, -1), v], dim=2)
        self.raw.append((k, v))
        return k, v

    def positions(self, row: int, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[layers, 1, kvH, len(index), hd] keys and values of batch row `row` at positions `index`."""
        k = torch.stack([k[row:row + 1, :, index] for k, _ in self.raw])
        v = torch.stack([v[row:row + 1, :, index] for _, v in self.raw])
        return k, v


class DualCache:
    """The context's keys/values for the window steps of one completion (or, on CUDA, of every
    completion whose context fits the same capacity bucket)."""

    def __init__(self, shape: Shape, batch: int, window: int, capacity: int, dtype: torch.dtype, device: torch.device):
        size = (shape.layers, batch, shape.kv_heads, capacity + window, shape.head_dim)
        self.k = torch.zeros(size, dtype=dtype, device=device)
        self.v = torch.zeros(size, dtype=dtype, device=device)
        self.batch, self.window, self.capacity = batch, window, capacity
        self.context_len = 0
        # True where a window query may look: the context's C slots and the window, not [C, capacity)
        self.mask = torch.ones(1, 1, window, capacity + window, dtype=torch.bool, device=device)

    def fill(self, recorder: Recorder, row: int, context: torch.Tensor) -> None:
        """Keep the recorded keys/values of positions `context` [C] of batch row `row` as the context
        of every candidate."""
        C = context.numel()
        assert C <= self.capacity, f"context of {C} exceeds the cache's capacity {self.capacity}"
        for layer, (k, v) in enumerate(recorder.raw):
            self.k[layer, :, :, :C] = k[row:row + 1, :, context]
            self.v[layer, :, :, :C] = v[row:row + 1, :, context]
        self.context_len = C
        self.mask[..., :C] = True
        self.mask[..., C:self.capacity] = False

    def window_mask(self) -> torch.Tensor | None:
        """None (every key) when the context fills the capacity, else the mask of the empty slots."""
        return self.mask if self.capacity > self.context_len else None

    def update(self, k: torch.Tensor, v: torch.Tensor, layer_idx: int, *args, **kwargs):
        cap, W = self.capacity, k.shape[2]               # k: [B, kvH, W, hd], the window's fresh keys
        self.k[layer_idx, :, :, cap:cap + W].copy_(k)
        self.v[layer_idx, :, :, cap:cap + W].copy_(v)
        return self.k[layer_idx, :, :, :cap + W], self.v[layer_idx, :, :, :cap + W]


# completions a stored prefix's reused keys/values may serve before the prefix is encoded afresh
MAX_REUSES = 8


class PrefixStore:
    """The prefix's keys/values from the last completion, reused by the next one for the longest
    common run of prompt tokens (what typing at the cursor leaves unchanged). Approximate: they were
    computed while attending to an earlier prompt. Bounded: only while the prompt after the span
    (`tail`: the suffix, which every prefix key attended to) is the one they saw, and for at most
    MAX_REUSES completions in a row (a reused position keeps the keys/values of the completion that
    encoded it, which did not see the text typed since)."""

    def __init__(self):
        self.ids: list[int] = []
        self.tail: tuple[int, ...] = ()
        self.kv: tuple[torch.Tensor, torch.Tensor] | None = None
        self.reuses = 0        # completions in a row whose stored keys/values carried reused ones
        self._counted = False  # this completion's reuse is counted (or it encoded afresh)
        self.requests = self.reused_tokens = self.encoded_tokens = 0

    def begin(self) -> None:
        """A completion starts: its first stored reuse counts towards MAX_REUSES (later forwards of the
        same completion, DreamOn's after each change of length, reuse what it stored itself)."""
        self._counted = False

    def lookup(self, ids: list[int], limit: int, tail: tuple[int, ...]) -> tuple[int, tuple[torch.Tensor, torch.Tensor] | None]:
        """(r, kv of positions [0, r)): the longest common prefix of `ids` and the stored ids, at most
        `limit`; (0, None) where the prompt after the span is not the stored one's, or the stored
        keys/values have served MAX_REUSES completions."""
        if self.kv is None or tuple(tail) != self.tail or self.reuses >= MAX_REUSES:
            return 0, None
        r = 0
        for a, b in zip(self.ids[:limit], ids[:limit]):
            if a != b:
                break
            r += 1
        if r == 0 or self.kv is None:
            return 0, None
        return r, (self.kv[0][..., :r, :], self.kv[1][..., :r, :])

    def keep(self, ids: list[int], kv: tuple[torch.Tensor, torch.Tensor], tail: tuple[int, ...], reused: bool) -> None:
        """Store the keys/values `kv` of prompt `ids` (before the span) beside `tail` (the prompt after
        it); `reused`: they carry ones an earlier completion stored."""
        self.ids, self.tail, self.kv = list(ids), tuple(tail), (kv[0].clone(), kv[1].clone())
        if not reused:
            self.reuses, self._counted = 0, True
        elif not self._counted:
            self.reuses, self._counted = self.reuses + 1, True

    def clear(self) -> None:
        self.ids, self.tail, self.kv, self.reuses, self._counted = [], (), None, 0, False

    def count(self, reused: int, encoded: int) -> None:
        self.requests += 1
        self.reused_tokens += reused
        self.encoded_tokens += encoded

    @property
    def stats(self) -> dict:
        total = self.reused_tokens + self.encoded_tokens
        return {"requests": self.requests, "reused_tokens": self.reused_tokens, "encoded_tokens": self.encoded_tokens,
                "reuse_rate": self.reused_tokens / total if total else 0.0, "entries": int(self.kv is not None),
                "approximate": True}
