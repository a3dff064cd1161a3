"""The commit rule of a denoising step as one kernel: per row, which masked positions to commit.

commit[j] = masked[j] and (rank[j] < k or confidence[j] > threshold), where rank[j] counts the masked
positions ahead of j (more confident, or as confident and further left). With threshold = +inf this
is the fixed schedule's top-k (`denoise.commit_topk`); with k = 1 it is Fast-dLLM's threshold rule,
"everything above τ, and at least the row's best" (`denoise.commit_threshold`). Those two functions
are the references. One program per row compares all L x L pairs: L is a span length (at most 256),
so the row fits in registers and no sort is needed. On ties the leftmost position wins; torch.topk
leaves the choice among equal values unspecified, so both are valid top-k sets.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def commit_kernel(conf_ptr, masked_ptr, commit_ptr, L, k, threshold, BLOCK_L: tl.constexpr):
    row = tl.program_id(0)
    j = tl.arange(0, BLOCK_L)
    inside = j < L
    offs = row.to(tl.int64) * L + j
    conf = tl.load(conf_ptr + offs, mask=inside, other=float("-inf"))
    masked = tl.load(masked_ptr + offs, mask=inside, other=0) != 0
    # ahead[i, j]: masked position i is picked before position j
    ahead = (conf[:, None] > conf[None, :]) | ((conf[:, None] == conf[None, :]) & (j[:, None] < j[None, :]))
    rank = tl.sum((ahead & masked[:, None]).to(tl.int32), axis=0)
    commit = masked & ((rank < k) | (conf > threshold))
    tl.store(commit_ptr + offs, commit.to(tl.uint8), mask=inside)


def launch(confidence: torch.Tensor, masked: torch.Tensor, k: int, threshold: float) -> torch.Tensor:
    """confidence: [B, L] float; masked: [B, L] bool -> commit [B, L] bool."""
    confidence = confidence.float().contiguous()
    masked = masked.contiguous()
    B, L = masked.shape
    commit = torch.empty_like(masked)
    if B and L:
        block_l = triton.next_power_of_2(L)
        commit_kernel[(B,)](confidence, masked.view(torch.uint8), commit.view(torch.uint8), L, k, threshold,
                     BLOCK_L=block_l, num_warps=4 if block_l <= 64 else 8)
    return commit
