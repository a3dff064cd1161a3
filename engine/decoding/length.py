"""Length strategies: how a span decides where the middle ends (`CompletionRequest.length`,
api.LENGTHS; DenoiseConfig.length). Pure, batched tensor rules, tested without a model, that
denoise.py's step loop and engine.py apply.

A span is L positions: the middle's content, then <|eom|>, then <|pad|> to the end (in training a
pad only ever follows <|eom|>). Whatever the strategy, once <|eom|> is committed the positions after
it become committed pads (`truncate_after_eom`). Under an all-mask span the end tokens hold much of
each position's probability (the model's marginal over every length), so an early <|eom|> often
truncates the middle before its content is decided; the strategies differ in when an end may commit:

* `auto` (the default) is resolved per request (`resolve_length`): `head` where the editor shows
  several lines (postprocess.wants_multiline) and the model has a length head, `pad` elsewhere: a
  multi-line middle is where the pad predictions cut completions shortest, while at a single-line
  cursor a fixed length loses more exact matches than it gains characters.
* `pad`: an <|eom|> or pad commits as soon as it is among a step's most confident
  proposals; under the `content` rule the proposed pads that end the span commit for free once more
  probable than PAD_CONFIDENCE (`trailing_pads`).
* `strict-pad`: those trailing pads must clear STRICT_PAD_CONFIDENCE.
* `late-end`: an end proposal is held back until its confidence clears END_CONFIDENCE; `left-end`:
  until every position before it is committed (the end is decided beside decided content, as an AR
  decoder decides to stop). Both commit what is left on the final step (`held_ends`).
* `first-step`, `first-step-mean`, `first-step-median`: <|eom|> is fixed from the first step's
  distribution over where it falls (its mode, mean or median: `end_position`, `fix_end`), in the
  spirit of CAL (length from the first step's confidence); the positions before it then may not
  propose an end token.
* `head`: <|eom|>'s position comes from the model's length head (config.length_classes), read at
  <|middle|> before the span is decoded (`head_end`); <|eom|> and the pads after it are committed
  before the first step (`place_end`), the engine bans both end tokens from the steps, and every
  step goes to content.

Once the end is decided, the span can be cut (`CompletionRequest.shrink_span`, `content` rule): when
everything after one of SHRINK_TO's lengths is committed pads, the remaining steps run on that
shorter span (`shrunk_length`), whose tail of pads is what the model saw in training. A request
that names no span length starts on a shorter span at a single-line cursor (`start_span`): a
single-line middle is a few tokens, and every position of a span costs the same at every step.

benchmarks/length.py measures the strategies side by side, benchmarks/span_cut.py the cut on and off,
benchmarks/span_lengths.py sets of lengths to cut to.
"""
from __future__ import annotations

import torch

from .postprocess import Cursor, wants_multiline

NEG_INF = float("-inf")
# a proposed <|pad|> more probable than this joins the span's free tail (rule `content`): with 0
# (every proposed pad) unsure pads cut completions short. `spanfill eval` reports `content` beside `fixed`.
PAD_CONFIDENCE = 0.5
# span lengths the `content` rule cuts a span down to once everything after them is committed pads
# (`shrunk_length`): a step's cost grows with the span's length, so the later steps of a short middle
# cost a fraction, at the same exact match (benchmarks/span_cut.py measures the cut on and off). 24
# serves the multi-line middles whose head-placed end falls past 16, which would otherwise run the
# whole span. Each is one more compiled CPU step to wait for at start (compiled.py takes 6 at most);
# finer sets cut closer still: benchmarks/span_lengths.py compares sets as the server asks
# (MODEL_CARD.md has the figures)
SHRINK_TO = (24, 16, 8)
# the span a diffusion request starts on at a single-line cursor when it names none (`start_span`):
# held-out single-line middles average ~6 tokens, and starting on 16 positions rather than 32 (then
# cut to 8) halves the positions decoded at the same exact match (benchmarks/span_cut.py)
SINGLE_LINE_SPAN = 16
STRICT_PAD_CONFIDENCE = 0.9    # `strict-pad`: the trailing pads' confidence
END_CONFIDENCE = 0.9           # `late-end`: an end token commits before the final step only above this
# `head` ends the span at this quantile of the head's count distribution, a little below its median:
# the more positions 4 steps must fill, the more of a multi-line middle this model writes that is not
# Python (pysyntax.py cuts it and AR writes it instead), while a lower quantile shows middles shorter
# than the reference's. Chosen on two sets of held-out multi-line tasks as the server asks (T=4, AR
# fallback): the lowest quantile tried whose chars shown stayed within 15% of the reference's on both,
# at an edit similarity as high as 0.4's: benchmarks/head_quantile.py (`Engine.head_quantile`
# overrides it per engine; MODEL_CARD.md has the figures)
HEAD_QUANTILE = 0.45
FIRST_STEP = {"first-step": "mode", "first-step-mean": "mean", "first-step-median": "median"}


def resolve_length(length: str, prefix: str, suffix: str, has_head: bool) -> str:
    """The strategy a request runs: `length` itself, or for `auto` `head` at a multi-line cursor
    (prefix/suffix with \\n line ends) of a model with a length head and `pad` otherwise."""
    if length != "auto":
        return length
    return "head" if has_head and wants_multiline(Cursor(prefix, suffix)) else "pad"


def start_span(span_length: int, prefix: str, suffix: str) -> int:
    """The span a diffusion request that names no length starts on: SINGLE_LINE_SPAN at a
    single-line cursor (postprocess.wants_multiline false), the model's span_length elsewhere."""
    if wants_multiline(Cursor(prefix, suffix)):
        return span_length
    return min(span_length, SINGLE_LINE_SPAN)


def truncate_after_eom(span: torch.Tensor, masked: torch.Tensor, eom: int, pad: int) -> None:
    """In place: once <|eom|> is committed at j, positions > j become committed pads and drop out."""
    is_eom = (span == eom) & ~masked
    index = torch.arange(span.shape[1], device=span.device)
    after = index > torch.where(is_eom, index, span.shape[1]).amin(1, keepdim=True)
    span.masked_fill_(after, pad)
    masked &= ~after


def trailing_pads(span: torch.Tensor, masked: torch.Tensor, confidence: torch.Tensor, proposal: torch.Tensor,
                   pad: int, min_confidence: float = PAD_CONFIDENCE) -> torch.Tensor:
    """[B, L] bool: masked positions in the run of pads that ends the span — proposed pad with
    confidence > min_confidence, or already pad — counted from the right end inward."""
    token = torch.where(masked, proposal, span)
    padded = (token == pad) & (~masked | (confidence > min_confidence))
    index = torch.arange(span.shape[1], device=span.device)
    last_unpadded = torch.where(padded, -1, index).amax(1, keepdim=True)   # reductions, not a scan: they fuse
    return (index > last_unpadded) & masked


def held_ends(masked: torch.Tensor, confidence: torch.Tensor, proposal: torch.Tensor, length: str,
              eom: int, pad: int) -> torch.Tensor:
    """[B, L] bool: masked positions whose end proposal (<|eom|> or pad) waits this step: under
    `late-end` those at or below END_CONFIDENCE, under `left-end` those with a masked position before
    them; none under the other strategies."""
    end = masked & ((proposal == eom) | (proposal == pad))
    if length == "late-end":
        return end & (confidence <= END_CONFIDENCE)
    if length == "left-end":
        index = torch.arange(masked.shape[1], device=masked.device)
        first_masked = torch.where(masked, index, masked.shape[1]).amin(1, keepdim=True)
        return end & (index > first_masked)
    return torch.zeros_like(masked)


def end_position(p_eom: torch.Tensor, estimate: str = "mode") -> torch.Tensor:
    """p_eom: [B, L] each position's probability of <|eom|> -> [B, 1] the position it is fixed at:
    the distribution's mode, mean (rounded) or median, over the span's positions."""
    if estimate == "mode":
        return p_eom.argmax(1, keepdim=True)
    p = p_eom / p_eom.sum(1, keepdim=True).clamp_min(1e-12)
    if estimate == "mean":
        index = torch.arange(p.shape[1], device=p.device, dtype=p.dtype)
        return (p * index).sum(1, keepdim=True).round().long()
    return (p.cumsum(1) < 0.5).sum(1, keepdim=True).clamp(max=p.shape[1] - 1)


def fix_end(logits: torch.Tensor, span: torch.Tensor, masked: torch.Tensor, eom: int, pad: int,
            estimate: str = "mode") -> None:
    """The `first-step` strategies, in place. logits: [B, L, V]; span/masked: [B, L]. A row at its
    first step (all masked) commits <|eom|> where its distribution puts it (`end_position`; the pads
    after it follow through truncate_after_eom); in every row with a committed <|eom|>, the masked
    positions before it may not propose an end token. Tensor ops, no branch: it compiles and
    graph-captures."""
    B, L = span.shape
    p_eom = torch.exp(logits[..., eom] - torch.logsumexp(logits, dim=-1))          # [B, L]
    index = torch.arange(L, device=span.device)
    fresh = masked.all(1, keepdim=True)                                              # [B, 1]
    place = fresh & (index == end_position(p_eom, estimate))
    span.masked_fill_(place, eom)
    masked &= ~place
    truncate_after_eom(span, masked, eom, pad)
    committed = (span == eom) & ~masked
    end = torch.where(committed, index, L).amin(1, keepdim=True)                     # [B, 1]; L: none
    before = masked & (index < end) & (end < L)
    logits[..., eom] = logits[..., eom].masked_fill(before, NEG_INF)
    logits[..., pad] = logits[..., pad].masked_fill(before, NEG_INF)


def head_end(p_length: torch.Tensor, quantile: float = HEAD_QUANTILE) -> int:
    """p_length: [K] the length head's distribution over the middle's token count (K-1 = that many or
    more) -> the count the span ends at: the distribution's `quantile`, robust to its long tail."""
    return int((p_length.float().cumsum(0) < quantile).sum().clamp(max=p_length.shape[0] - 1))


def place_end(span: torch.Tensor, masked: torch.Tensor, end: int, eom: int, pad: int) -> None:
    """In place, before the first step: <|eom|> committed at `end` and pads after it; an end at or
    past the span's length commits nothing (the middle fills the span)."""
    if end < span.shape[1]:
        span[:, end] = eom
        span[:, end + 1:] = pad
        masked[:, end:] = False


def shrink_lengths(span_length: int, lengths: tuple[int, ...] = SHRINK_TO) -> tuple[int, ...]:
    """The lengths (SHRINK_TO's by default) a span of span_length can be cut down to, longest first."""
    return tuple(sorted((n for n in set(lengths) if n < span_length), reverse=True))


def shrunk_length(span: torch.Tensor, masked: torch.Tensor, pad: int, lengths: tuple[int, ...]) -> int:
    """The shortest of `lengths` that holds everything of the span except committed trailing pads
    (across all rows), or the span's own length. A span's tail of committed pads is what a shorter
    span's tail would be: the model was trained on spans of 16, 32 and 64 whose middle ends with
    <|eom|> and pads, so the remaining steps can run on the shorter span, each costing about half."""
    L = span.shape[1]
    live = masked | (span != pad)
    index = torch.arange(L, device=span.device)
    need = int(torch.where(live, index + 1, 0).amax())    # a host sync; the step loop already has one
    return min((n for n in lengths if need <= n < L), default=L)
