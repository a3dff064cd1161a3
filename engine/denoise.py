"""The span denoiser (DESIGN §5): L masks, T steps, commit the most confident positions each step.

Pure tensor functions (schedule, confidence, commit rules, <|eom|> truncation) are tested without a
model; `denoise` is the one place that owns the step loop. Following LLaDA (Nie et al. 2025, §2.4,
"low-confidence remasking") a committed token is never re-masked; following Fast-dLLM (Wu et al.
2025) the threshold rule commits every position whose confidence clears τ, at least one per step.
The deadline turns the decoder into an anytime one: when the budget is spent, the next step is the
last and commits everything left.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from . import kernels
from .model import SpanfillModel

NEG_INF = float("-inf")


def commit_schedule(span_length: int, steps: int) -> list[int]:
    """How many positions to commit at each of `steps` steps so that the span is finished in time;
    the remainder goes to the early steps (as LLaDA's get_num_transfer_tokens)."""
    steps = max(1, min(steps, span_length))
    base, extra = divmod(span_length, steps)
    return [base + (1 if s < extra else 0) for s in range(steps)]


def pick_tokens(logits: torch.Tensor, temperature: float = 0.0, top_p: float = 1.0,
                generator: torch.Generator | None = None, banned: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """logits: [M, V] -> (confidence [M], token [M]). Greedy when temperature == 0, else a sample from
    the tempered, nucleus-filtered distribution; confidence is the chosen token's probability.
    `banned` ids (control tokens that may never appear inside a middle) get zero probability.
    On CUDA the greedy case is one fused Triton kernel that never materialises probabilities."""
    if temperature <= 0 and kernels.enabled_for(logits):
        return kernels.confidence_argmax(logits, banned)
    logits = logits.float()
    if banned:
        logits[..., banned] = NEG_INF
    if temperature <= 0:   # the argmax's probability without materialising the distribution
        top, token = logits.max(dim=-1)
        return torch.exp(top - torch.logsumexp(logits, dim=-1)), token
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    token = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return probs.gather(-1, token[:, None]).squeeze(-1), token


def commit_topk(confidence: torch.Tensor, masked: torch.Tensor, k: int) -> torch.Tensor:
    """confidence/masked: [B, L]. Commit the k most confident masked positions of each row."""
    if kernels.enabled_for(confidence):
        return kernels.commit(confidence, masked, k)
    conf = confidence.masked_fill(~masked, NEG_INF)
    idx = conf.topk(min(k, conf.shape[1]), dim=1).indices
    return torch.zeros_like(masked).scatter(1, idx, True) & masked


def commit_threshold(confidence: torch.Tensor, masked: torch.Tensor, threshold: float) -> torch.Tensor:
    """Commit every masked position with confidence > threshold, and at least the best one per row."""
    if kernels.enabled_for(confidence):
        return kernels.commit(confidence, masked, 1, threshold)
    return (masked & (confidence > threshold)) | commit_topk(confidence, masked, 1)


def truncate_after_eom(span: torch.Tensor, masked: torch.Tensor, eom: int, pad: int) -> None:
    """In place: once <|eom|> is committed at j, positions > j become committed pads and drop out."""
    is_eom = (span == eom) & ~masked
    after = (is_eom.cumsum(1) - is_eom.long()) > 0
    span.masked_fill_(after, pad)
    masked &= ~after


@dataclass
class DenoiseConfig:
    span_length: int
    steps: int
    rule: str = "fixed"
    threshold: float = 0.9
    temperature: float = 0.0
    top_p: float = 1.0
    banned: list[int] | None = None
    greedy_first: bool = False     # with temperature > 0: candidate 0 is the greedy one, the rest sampled
    first_bias: torch.Tensor | None = None   # [V] added to the first position's logits (healing.py)


def commit_step(span: torch.Tensor, masked: torch.Tensor, confidence: torch.Tensor, proposal: torch.Tensor,
                k: int, cfg: DenoiseConfig, final: bool, eom: int, pad: int) -> None:
    """In place, the end of every step: choose positions by cfg.rule (all that are left on the final
    step), copy their proposed tokens into span and drop them from masked. All tensors [B, L]."""
    if final:
        commit = masked.clone()
    elif cfg.rule == "threshold":
        commit = commit_threshold(confidence, masked, cfg.threshold)
    else:
        commit = commit_topk(confidence, masked, k)
    apply_commit(span, masked, commit, proposal, eom, pad)


def apply_commit(span: torch.Tensor, masked: torch.Tensor, commit: torch.Tensor, proposal: torch.Tensor,
                 eom: int, pad: int) -> None:
    span.copy_(torch.where(commit, proposal, span))
    masked &= ~commit
    truncate_after_eom(span, masked, eom, pad)


class StepPlan:
    """The steps of one request as (k, final) pairs: commit k positions, or everything left when final
    (the last step, or the deadline has passed). Iteration stops when `cancelled()` turns true;
    afterwards `deadline_hit` and `was_cancelled` say what happened."""

    def __init__(self, span_length: int, steps: int, deadline: float | None = None,
                 cancelled: Callable[[], bool] | None = None):
        self.schedule = commit_schedule(span_length, steps)
        self.deadline, self.cancelled = deadline, cancelled
        self.deadline_hit = self.was_cancelled = False

    def __iter__(self):
        for step, k in enumerate(self.schedule):
            if self.cancelled is not None and self.cancelled():
                self.was_cancelled = True
                return
            final = step == len(self.schedule) - 1
            if self.deadline is not None and time.perf_counter() >= self.deadline:
                final = self.deadline_hit = True
            yield k, final


@dataclass
class DenoiseOutput:
    span: torch.Tensor     # [B, L] committed tokens
    steps_run: int
    deadline_hit: bool
    cancelled: bool


def _pick(logits: torch.Tensor, masked: torch.Tensor, cfg: DenoiseConfig, generator) -> tuple[torch.Tensor, torch.Tensor]:
    """pick_tokens over the masked rows of all candidates (row-major, so candidate 0's rows come
    first), greedy for candidate 0 when cfg.greedy_first."""
    if not (cfg.greedy_first and cfg.temperature > 0):
        return pick_tokens(logits, cfg.temperature, cfg.top_p, generator, cfg.banned)
    first_row = int(masked[0].sum())   # a host sync, only on this sampled path
    conf0, tok0 = pick_tokens(logits[:first_row], 0.0, 1.0, None, cfg.banned)
    conf1, tok1 = pick_tokens(logits[first_row:], cfg.temperature, cfg.top_p, generator, cfg.banned)
    return torch.cat([conf0.float(), conf1.float()]), torch.cat([tok0, tok1])


def first_position_rows(masked: torch.Tensor) -> torch.Tensor:
    """Indices, among the masked rows of all candidates (row-major), of each candidate's position 0
    while it is still masked."""
    counts = masked.sum(1)
    return (counts.cumsum(0) - counts)[masked[:, 0]]


def denoise(model: SpanfillModel, kv, context_len: int, n: int, cfg: DenoiseConfig, mask_id: int,
            eom_id: int, pad_id: int, generator: torch.Generator | None = None,
            deadline: float | None = None, cancelled: Callable[[], bool] | None = None,
            fused_step: Callable | None = None) -> DenoiseOutput:
    """Denoise n candidate spans against the cached context kv[:, :, :context_len].
    fused_step(span, masked, context_len, kv, k), in place, replaces a whole step of greedy decoding
    with the fixed rule (compiled.py; k = L on the final step: commit everything left)."""
    device = model.embed.weight.device
    L = cfg.span_length
    span = torch.full((n, L), mask_id, dtype=torch.long, device=device)
    masked = torch.ones(n, L, dtype=torch.bool, device=device)
    plan = StepPlan(L, cfg.steps, deadline, cancelled)
    steps_run = 0
    for k, final in plan:
        steps_run += 1
        if fused_step is not None:
            fused_step(span, masked, context_len, kv, L if final else k)
        else:
            hidden = model.span_step(span, context_len, kv)             # [n, L, D]
            logits = model.logits(hidden[masked])                        # [masked rows, V]
            if cfg.first_bias is not None:
                rows = first_position_rows(masked)
                logits[rows] = logits[rows] + cfg.first_bias.to(logits.dtype)
            conf_m, token_m = _pick(logits, masked, cfg, generator)
            confidence = torch.full((n, L), NEG_INF, device=device)
            proposal = span.clone()
            confidence[masked] = conf_m
            proposal[masked] = token_m
            commit_step(span, masked, confidence, proposal, k, cfg, final, eom_id, pad_id)
        if final or not masked.any():
            break
    return DenoiseOutput(span, steps_run, plan.deadline_hit, plan.was_cancelled)


def ar_decode(model: SpanfillModel, kv, context_len: int, last_hidden: torch.Tensor, max_tokens: int,
              eom_id: int, temperature: float = 0.0, top_p: float = 1.0,
              generator: torch.Generator | None = None, banned: list[int] | None = None, deadline: float | None = None,
              cancelled: Callable[[], bool] | None = None, first_bias: torch.Tensor | None = None,
              token_step: Callable | None = None) -> DenoiseOutput:
    """The baseline: decode the same weights one token per step through the causal path. kv buffers
    must have room for context_len + max_tokens positions; positions past context_len are scratch.
    first_bias [V] is added to the first token's logits (healing.py); token_step(token [1, 1],
    position, kv) -> logits [1, V] is the causal step (compiled.py), the eager model's by default."""
    if token_step is None:
        def token_step(token, position, kv):
            return model.logits(model.encode_context(token, position, kv))
    tokens: list[int] = []
    logits = model.logits(last_hidden)                                # [1, V]
    deadline_hit = was_cancelled = False
    for i in range(max_tokens):
        if cancelled is not None and cancelled():
            was_cancelled = True
            break
        if i == 0 and first_bias is not None:
            logits = logits + first_bias.to(logits.dtype)
        _, token = pick_tokens(logits, temperature, top_p, generator, banned)
        tokens.append(int(token))
        if tokens[-1] == eom_id:
            break
        if deadline is not None and time.perf_counter() >= deadline:
            deadline_hit = True
            break
        if i + 1 < max_tokens:
            logits = token_step(token[None], context_len + i, kv)
    span = torch.tensor([tokens], dtype=torch.long)
    return DenoiseOutput(span, len(tokens), deadline_hit, was_cancelled)
