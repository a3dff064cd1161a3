"""Triton kernels for the fused hot ops of a denoising step (DESIGN §7), with torch as the fallback.

    if kernels.enabled_for(logits):          # a CUDA tensor, and Triton importable
        confidence, token = kernels.confidence_argmax(logits, banned)

* `confidence.py`  — softmax-confidence-argmax over the vocabulary (greedy `pick_tokens`).
* `commit_rule.py` — the commit rule: top-k of the fixed schedule, or the threshold rule.

Each kernel's reference is the torch function it replaces in `denoise.py`; tests/engine/test_kernels.py
runs the kernels under TRITON_INTERPRET=1 on the CPU against them (in a child process: Triton reads
the variable when it is imported). Triton is optional: it is imported only when a CUDA tensor first
asks for a kernel, and where it is missing (macOS, Windows, a CPU-only install) everything stays on
the torch path, with one debug log line and no warning.
"""
from __future__ import annotations

import functools
import logging

import torch

log = logging.getLogger(__name__)


@functools.cache
def _triton_available() -> bool:
    try:
        from . import commit_rule, confidence  # noqa: F401  (imports triton)
    except ImportError as err:
        log.debug("triton is not available (%s); denoising ops stay on torch", err)
        return False
    return True


def enabled_for(t: torch.Tensor) -> bool:
    """Whether ops on `t` should use the Triton kernels: it lives on CUDA and Triton is importable."""
    return t.is_cuda and _triton_available()


@functools.lru_cache(maxsize=64)
def _banned_ids(banned: tuple[int, ...], device: torch.device) -> torch.Tensor:
    # Cached so the host-to-device copy happens once, never inside a captured CUDA graph. An empty
    # list becomes [-1], which matches no token, so the kernel needs no special case.
    return torch.tensor(banned or (-1,), dtype=torch.int32, device=device)


def confidence_argmax(logits: torch.Tensor, banned: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """logits: [M, V] -> (confidence [M] fp32, token [M] int64): greedy `pick_tokens`, fused."""
    from . import confidence
    return confidence.launch(logits, _banned_ids(tuple(banned or ()), logits.device))


def commit(confidence: torch.Tensor, masked: torch.Tensor, k: int, threshold: float = float("inf")) -> torch.Tensor:
    """[B, L] -> bool [B, L]: masked positions ranked < k, or above threshold (see commit_rule.py)."""
    from . import commit_rule
    return commit_rule.launch(confidence, masked, k, threshold)
