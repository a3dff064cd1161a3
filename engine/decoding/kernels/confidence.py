"""Softmax-confidence-argmax over the vocabulary in one pass, without materialising probabilities.

The greedy pick of a denoising step needs, per row, only the argmax token and its probability
exp(max - logsumexp) = 1 / sum(exp(x - max)). One program walks its row in vocabulary blocks with an
online max/sum-exp (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax"), kept
per lane and reduced once at the end, so a [M, V] logits tensor is read once and nothing of size V
is written. Banned ids get -inf, as `denoise.pick_tokens` does. Ties pick the lowest token id, as
`torch.max` does. The reference is `denoise.pick_tokens(logits, 0.0, banned=banned)`.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK_V = 1024   # vocabulary ids per iteration
BLOCK_B = 16     # banned ids compared per inner iteration


@triton.jit
def confidence_argmax_kernel(logits_ptr, row_stride, banned_ptr, n_banned, conf_ptr, token_ptr, V,
                             BLOCK_V: tl.constexpr, BLOCK_B: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row.to(tl.int64) * row_stride
    b = tl.arange(0, BLOCK_B)
    lane_max = tl.full([BLOCK_V], float("-inf"), tl.float32)
    lane_sum = tl.zeros([BLOCK_V], tl.float32)
    lane_arg = tl.zeros([BLOCK_V], tl.int32)
    for start in range(0, V, BLOCK_V):
        offs = start + tl.arange(0, BLOCK_V)
        x = tl.load(base + offs, mask=offs < V, other=float("-inf")).to(tl.float32)
        hits = tl.zeros([BLOCK_V], tl.int32)
        for b_start in range(0, n_banned, BLOCK_B):   # usually one pass: a handful of control tokens
            banned = tl.load(banned_ptr + b_start + b, mask=b_start + b < n_banned, other=-1)
            hits += tl.sum((offs[:, None] == banned[None, :]).to(tl.int32), axis=1)
        x = tl.where(hits > 0, float("-inf"), x)
        new_max = tl.maximum(lane_max, x)
        shift = tl.where(new_max == float("-inf"), 0.0, new_max)   # a lane with nothing yet stays 0, not NaN
        lane_sum = lane_sum * tl.exp(lane_max - shift) + tl.exp(x - shift)
        lane_arg = tl.where(x > lane_max, offs, lane_arg)            # strict: a lane keeps its first maximum
        lane_max = new_max
    row_max = tl.max(lane_max, axis=0)
    shift = tl.where(row_max == float("-inf"), 0.0, row_max)
    total = tl.sum(lane_sum * tl.exp(lane_max - shift), axis=0)
    token = tl.min(tl.where(lane_max == row_max, lane_arg, V), axis=0)
    tl.store(conf_ptr + row, 1.0 / total)
    tl.store(token_ptr + row, token.to(tl.int64))


def launch(logits: torch.Tensor, banned: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """logits: [M, V] (any float dtype); banned: [NB] int32 on the same device -> (confidence [M] fp32,
    token [M] int64), as `pick_tokens` returns them."""
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    M, V = logits.shape
    conf = torch.empty(M, dtype=torch.float32, device=logits.device)
    token = torch.empty(M, dtype=torch.int64, device=logits.device)
    if M:
        confidence_argmax_kernel[(M,)](logits, logits.stride(0), banned, banned.numel(), conf, token, V,
                     BLOCK_V=min(BLOCK_V, triton.next_power_of_2(V)), BLOCK_B=BLOCK_B, num_warps=8)
    return conf, token
