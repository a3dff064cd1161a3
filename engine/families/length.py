"""How long a completion is, for models that denoise a fixed number of masks.

Fixed-length infilling loses a third of its quality against oracle lengths in the publishers'
figures, and an inline completion must stop where the code does. Strategies (pure functions here,
driven by engine.py):

* `eos` — one forward over L masks gives, per position, the probability that it is an end token
  (eos or pad). The span length is the split "content, then end tokens" the model finds most
  likely: argmax over l of  sum_{j<l} log(1 - p_end[j]) + sum_{j>=l} log p_end[j]. When l < L the
  span is laid out again with l masks, so the suffix follows the content directly as in training.
  A model never trained to pad an infill (the base models) keeps L.
* `confidence` — the first step runs at several span lengths as one batch, and the length whose
  proposals are most confident on average (mean log max-probability) wins: a length chosen from the
  first step's confidence, the idea the issue takes from the CAL paper (our criterion; the paper's
  exact rule was not read). It costs one batched forward per candidate length.
* `expand` — DreamOn's own mechanism: a committed `<|expand|>` turns its position into two masks, a
  committed delete token removes its position, so the span grows and shrinks while it is denoised.
* `fixed` — L masks, every one filled (the publishers' fixed-length evaluation).

Whatever the strategy, a committed end token ends the completion (decoding/length.py: truncate_after_eom).
"""
from __future__ import annotations

import torch

STRATEGIES = ("eos", "confidence", "expand", "fixed")
EPS = 1e-6


def end_split(p_end: torch.Tensor) -> torch.Tensor:
    """p_end: [B, L] probability that each position is an end token -> [B] span lengths in 1..L,
    the most likely split into content then end tokens (ties go to the longer span)."""
    p = p_end.float().clamp(EPS, 1 - EPS)
    L = p.shape[1]
    zero = torch.zeros_like(p[:, :1])
    content = torch.cat([zero, torch.log1p(-p).cumsum(1)], dim=1)                 # [B, L+1]: sum_{j<l}
    ends = torch.cat([torch.log(p).flip(1).cumsum(1).flip(1), zero], dim=1)        # [B, L+1]: sum_{j>=l}
    score = (content + ends)[:, 1:]                                                # l = 1..L
    best = score.flip(1).argmax(1)                                                 # flipped: ties -> longer
    return L - best


def candidate_lengths(span_length: int) -> list[int]:
    """The span lengths the `confidence` strategy tries: a quarter, a half and all of L."""
    return sorted({max(1, span_length // 4), max(1, span_length // 2), span_length})


def length_scores(confidence: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """confidence: [K, Lmax] max-probabilities of layout k's first lengths[k] positions (the rest
    ignored) -> [K] mean log-confidence."""
    K, Lmax = confidence.shape
    index = torch.arange(Lmax, device=confidence.device)
    valid = index[None, :] < torch.tensor(lengths, device=confidence.device)[:, None]
    logs = torch.log(confidence.float().clamp_min(EPS)).masked_fill(~valid, 0.0)
    return logs.sum(1) / valid.sum(1)


def choose_length(scores: torch.Tensor) -> int:
    """The index of the best score; ties go to the first (the shorter length: candidate_lengths is sorted)."""
    return int(torch.argmax(scores))


def expand_delete(tokens: torch.Tensor, masked: torch.Tensor, commit: torch.Tensor, proposal: torch.Tensor,
                  mask_id: int, expand_id: int, delete_id: int, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One DreamOn row after a step. tokens/masked/commit/proposal: [M]. Committed positions take
    their proposal, except that <|expand|> becomes two masks (one while the span is at max_length)
    and the delete token removes its position. Returns the new (tokens [M'], masked [M'])."""
    out_tokens: list[int] = []
    out_masked: list[bool] = []
    grow = max_length - tokens.numel()
    for tok, is_masked, is_commit, prop in zip(tokens.tolist(), masked.tolist(), commit.tolist(), proposal.tolist()):
        if not is_commit:
            out_tokens.append(tok)
            out_masked.append(is_masked)
        elif prop == expand_id:
            copies = 2 if grow > 0 else 1
            grow -= copies - 1
            out_tokens += [mask_id] * copies
            out_masked += [True] * copies
        elif prop != delete_id:
            out_tokens.append(prop)
            out_masked.append(False)
    device = tokens.device
    return (torch.tensor(out_tokens, dtype=tokens.dtype, device=device),
            torch.tensor(out_masked, dtype=torch.bool, device=device))
