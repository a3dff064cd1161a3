"""The dense two-in-one training objective (DESIGN §4), as pure functions over a batch.

Each sequence is laid out, left-padded to a fixed context width C, as

    [pad … pad | context (ends <|middle|>) | middle + <|eom|> + pad…  (L) | noised span (L)]
    └──────────── causal: AR next-token loss on every real token ──────┘  └ bidirectional ┘

The noised span reuses the position ids of the clean middle, attends to itself and to the context up
to <|middle|>, and never to the clean middle. Its loss is the masked-diffusion (MDLM / LLaDA) bound:
cross-entropy on masked positions weighted by 1/t, t ~ U(0, 1) per sequence.

A model with a length head (config.length_classes) also learns the middle's token count from the
hidden state at <|middle|>, before any span token is seen. A middle cut off by the span (no
<|eom|> within L) only says "at least L": its loss is the head's probability of every count >= L
(a censored observation), so mixing span lengths never teaches a wrong count.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .samples import Example, ExampleStream
from ..core.tokenizer import SpecialIds

T_MIN = 1e-3
CONTEXT_WIDTH_STEP = 64


@dataclass
class Batch:
    tokens: torch.Tensor       # [B, S]
    positions: torch.Tensor    # [B, S]
    mask: torch.Tensor         # [B, 1, S, S] bool, True = may attend
    ar_targets: torch.Tensor   # [B, S] next-token targets, -100 where no loss
    span_targets: torch.Tensor # [B, L] clean span (middle + eom + pad)
    span_masked: torch.Tensor  # [B, L] bool: positions replaced by <|mask|>
    t: torch.Tensor            # [B] realised masking rate of the span
    length_lo: torch.Tensor    # [B] the middle's token count, or L when the span cuts it off
    length_censored: torch.Tensor  # [B] bool: cut off, the count is length_lo or more
    span_length: int
    context_width: int

    @property
    def real_tokens(self) -> int:
        return int((self.ar_targets != -100).sum()) + self.span_targets.numel()

    @property
    def loss_index(self) -> tuple[torch.Tensor, torch.Tensor]:
        """`loss_index` of this batch's targets."""
        return loss_index(self.ar_targets, self.span_masked)


def loss_index(ar_targets: torch.Tensor, span_masked: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the losses are: the flat indices into [B, S] of the positions with a next-token target
    and into [B, L] of the masked span positions (`sparse_loss_terms` projects only these)."""
    return (ar_targets.reshape(-1) != -100).nonzero().squeeze(1), span_masked.reshape(-1).nonzero().squeeze(1)


def context_width_for(n_tokens: int) -> int:
    """The padded context width for contexts of up to n_tokens (a multiple of CONTEXT_WIDTH_STEP)."""
    return -(-n_tokens // CONTEXT_WIDTH_STEP) * CONTEXT_WIDTH_STEP


def build_batch(examples: list[Example], span_length: int, special: SpecialIds,
                generator: torch.Generator | None = None, min_context_width: int = 0) -> Batch:
    """min_context_width pads every batch to at least that width, so a compiled step sees one
    shape per span length (a longer context still widens the batch)."""
    B, L = len(examples), span_length
    # round the context width up so only a handful of shapes ever occur: oneDNN caches kernels per
    # shape and the allocator fragments, so free-running widths grow memory by GBs over a run
    C = max(context_width_for(max(len(e.context) for e in examples)), min_context_width)
    S = C + 2 * L
    tokens = torch.full((B, S), special.pad, dtype=torch.long)
    ar_targets = torch.full((B, S), -100, dtype=torch.long)
    span_targets = torch.full((B, L), special.pad, dtype=torch.long)
    starts = torch.empty(B, dtype=torch.long)
    length_lo = torch.tensor([e.target[:L].index(special.eom) if special.eom in e.target[:L] else L for e in examples])
    length_censored = length_lo == L              # no <|eom|> within the span: L tokens or more
    for b, ex in enumerate(examples):
        start = C - len(ex.context)
        starts[b] = start
        clean = ex.context + ex.target[:L]
        tokens[b, start:C + len(ex.target[:L])] = torch.tensor(clean)
        # AR: position i predicts token i+1, for every real token up to the end of the middle
        ar_targets[b, start:C + len(ex.target[:L]) - 1] = torch.tensor(clean[1:])
        span_targets[b, :len(ex.target[:L])] = torch.tensor(ex.target[:L])

    # stratified t over the batch (MDLM's low-discrepancy sampler) lowers the variance of the loss
    t = ((torch.rand(1, generator=generator) + torch.arange(B)) / B).clamp_min(T_MIN)
    span_masked = torch.rand(B, L, generator=generator) < t[:, None]
    forced = torch.randint(0, L, (B,), generator=generator)
    span_masked[torch.arange(B), forced] = True          # at least one masked position
    # weight by the realised masking rate: with the forced position, a tiny sampled t would
    # otherwise put a 1/t = 1000x weight on a single token and spike the loss
    t = span_masked.float().mean(1)
    tokens[:, C + L:] = torch.where(span_masked, special.mask, span_targets)

    positions = torch.arange(S).repeat(B, 1)
    positions[:, C + L:] = torch.arange(C, C + L)

    idx = torch.arange(S)
    key_real = idx[None, :] >= starts[:, None]                              # [B, S]
    causal = idx[:, None] >= idx[None, :]                                   # [S, S]
    mask = causal[None] & key_real[:, None, :]
    # noised span rows: context (real part) + the noised span itself, nothing else
    span_rows = torch.zeros(S, dtype=torch.bool)
    span_rows[C + L:] = True
    span_allowed = (idx[None, :] < C) & key_real | (idx[None, :] >= C + L)  # [B, S]
    mask = torch.where(span_rows[None, :, None], span_allowed[:, None, :], mask)
    # left-pad rows attend to themselves only, so no row is fully masked (avoids NaN in softmax)
    mask |= torch.eye(S, dtype=torch.bool)[None]
    return Batch(tokens, positions, mask[:, None], ar_targets, span_targets, span_masked, t,
                 length_lo, length_censored, L, C)


def losses(logits: torch.Tensor, batch: Batch, length_logits: torch.Tensor | None = None):
    """Returns (ar_loss, diffusion_loss, length_loss); logits: [B, S, V]; length_logits [B, K] or None
    (then the length loss is 0)."""
    return loss_terms(logits, batch.ar_targets, batch.span_targets, batch.span_masked, batch.t,
                      batch.context_width, batch.span_length, length_logits, batch.length_lo, batch.length_censored)


def length_loss(length_logits: torch.Tensor, lo: torch.Tensor, censored: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the length head [B, K]: -log p(count) for a middle that ends in the span,
    -log p(count >= lo) for one the span cut off (counts past K-1 are class K-1)."""
    K = length_logits.shape[-1]
    logits = length_logits.float()
    k = torch.arange(K, device=logits.device)
    lo = lo.clamp(max=K - 1)[:, None]
    hit = torch.where(censored[:, None], k >= lo, k == lo)                    # [B, K]
    return (logits.logsumexp(-1) - logits.masked_fill(~hit, float("-inf")).logsumexp(-1)).mean()


def loss_terms(logits, ar_targets, span_targets, span_masked, t, C: int, L: int,
               length_logits=None, length_lo=None, length_censored=None):
    """`losses` over plain tensors (the form torch.compile traces)."""
    V = logits.shape[-1]
    causal_logits = logits[:, :C + L].float()
    ar = F.cross_entropy(causal_logits.reshape(-1, V), ar_targets[:, :C + L].reshape(-1), ignore_index=-100)
    span_logits = logits[:, C + L:].float()                                 # [B, L, V]
    ce = F.cross_entropy(span_logits.reshape(-1, V), span_targets.reshape(-1), reduction="none").view_as(span_targets)
    diffusion = ((ce * span_masked).sum(1) / t / L).mean()
    return ar, diffusion, _length_term(length_logits, length_lo, length_censored, ar.device)


def _length_term(length_logits, length_lo, length_censored, device: torch.device) -> torch.Tensor:
    """The length head's loss, or 0 for a model without a head."""
    if length_logits is None:
        return torch.zeros((), device=device)
    return length_loss(length_logits, length_lo, length_censored)


def sparse_loss_terms(model, h, ar_targets, span_targets, t, ar_index, span_index, C: int, L: int,
                      length_logits=None, length_lo=None, length_censored=None):
    """`loss_terms` from the final hidden states h [B, S, D] (model: what projects them, `logits`),
    the vocabulary projection taken only where there is a loss (`loss_index`): the same losses without
    the logits of left padding, of the pad tail after <|eom|> and of span positions left unmasked (the
    vocabulary projection is the step's largest matmul)."""
    B, S, D = h.shape
    ar_logits = model.logits(h.reshape(B * S, D)[ar_index]).float()                 # [Na, V]
    ar = F.cross_entropy(ar_logits, ar_targets.reshape(-1)[ar_index])
    span_h = h[:, C + L:].reshape(B * L, D)[span_index]
    ce = F.cross_entropy(model.logits(span_h).float(), span_targets.reshape(-1)[span_index], reduction="none")
    diffusion = (ce / t[span_index // L]).sum() / (B * L)       # = the mean over rows of sum(ce * masked) / t / L
    return ar, diffusion, _length_term(length_logits, length_lo, length_censored, ar.device)


class BatchStream:
    """Training batches of `size` examples at a span length. bucketed=True groups examples whose
    contexts round up to the same width (context_width_for) and pads each batch only to its own
    width: most contexts are well short of the budget's (no snippet, a file's first lines), so one
    fixed width would spend a good part of every step on left padding. Examples wait in their
    bucket until it is full; those still waiting when a run stops are not trained on (a resumed run
    draws fresh ones). bucketed=False: consecutive examples, padded to at least min_context_width
    (one shape per span length for a statically compiled step)."""

    def __init__(self, stream: ExampleStream, size: int, special: SpecialIds, generator: torch.Generator | None = None,
                 bucketed: bool = True, min_context_width: int = 0):
        self.stream, self.size, self.special, self.generator = stream, size, special, generator
        self.bucketed, self.min_context_width = bucketed, min_context_width
        self.waiting: dict[tuple[int, int], list[Example]] = {}

    def next(self, span_length: int) -> Batch:
        if not self.bucketed:
            examples = [self.stream.next(span_length) for _ in range(self.size)]
            return build_batch(examples, span_length, self.special, self.generator, self.min_context_width)
        while True:
            example = self.stream.next(span_length)
            key = (span_length, context_width_for(len(example.context)))
            bucket = self.waiting.setdefault(key, [])
            bucket.append(example)
            if len(bucket) == self.size:
                del self.waiting[key]
                return build_batch(bucket, span_length, self.special, self.generator)
