"""The model-family seam: what decoding needs of a model, and nothing more.

The denoising loop (decoding/denoise.py), its compiled CPU step (decoding/compiled.py), its CUDA
graphs (decoding/cuda_step.py) and the context cache (decoding/context_cache.py) call a model only
through this interface, so another architecture plugs in by implementing it — load its weights into
a module with these methods, and give its tokenizer a `special` with the ids of mask, eom (end of
the middle) and pad by name — without touching the hot path.
`SpanfillModel` (model.py) is the reference implementation; tests/engine/test_family.py holds it to
the interface.

Shapes: B candidates, L span positions, N new context tokens, D hidden size, V vocabulary; `kv` is a
list of per-layer (keys, values) buffers, each [B or 1, H, capacity, Dh], from `allocate_kv`.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]


@runtime_checkable
class ModelFamily(Protocol):
    cfg: object          # sizes the engine reads: vocab_size, span_length, steps, max_positions, max_context_tokens
    embed: torch.nn.Embedding   # its weight's device and dtype are the model's

    def allocate_kv(self, capacity: int, batch: int = 1) -> KV:
        """Zeroed key/value buffers for `capacity` positions: the one place their shape is known."""
        ...

    def encode_context(self, tokens: torch.Tensor, start: int, kv: KV, every: bool = False) -> torch.Tensor:
        """Prefill: encode tokens [1, N] at positions start..start+N-1 into kv; returns the hidden
        state of the last one [1, D] (whose logits predict the next token), or with `every` those of
        all N [N, D] (the AR check of a diffusion draft, decoding/check.py)."""
        ...

    def span_step(self, span: torch.Tensor, context_len: int, kv: KV, positions: torch.Tensor | None = None,
                  key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """One denoising forward pass of span [B, L] against the first context_len cached positions;
        returns hidden states [B, L, D]. Writes nothing a later request reads. With static shapes,
        positions [L] are the span's positions and key_mask [context_len + L] the keys it may see."""
        ...

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Hidden states [..., D] -> logits [..., V] for the token at each span position."""
        ...
