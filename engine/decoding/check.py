"""Diffusion's draft checked by the AR path of the same weights (`CompletionRequest.check`).

The span's denoiser sees the code on both sides of the cursor and proposes the middle's first
tokens well; it is worse at where the middle ends (most of its misses are a middle cut short). The
model's causal path is the better judge of what comes next, token by token. So the draft is one
causal pass away from a check, as in speculative decoding with the denoiser as the drafter: the pass
over the draft's tokens gives AR's distribution at every draft position at once. A draft token
stands while AR gives it probability >= `accept`, or ranks it first; at the first that does not,
AR's own choice replaces it and AR writes on, token by token, to <|eom|> or the caller's stop.
`accept` = 1 keeps only what AR would have written itself (the text is AR's, in fewer passes);
lower values keep more of the denoiser's choices where AR finds them plausible. The draft's own
<|eom|> may be held to a higher bar, `accept_end` (the default request's: 0.3): the draft ends a
middle early more often than AR does.

    out = check_draft(model, kv, C, last_hidden, draft, accept=0.03, max_tokens=32, eom_id=eom,
                      banned=[pad, mask, ...], first_bias=healing.first_bias, stop=stop, accept_end=0.3)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..api import DEFAULT_CHECK, DEFAULT_END_CHECK
from ..core.family import ModelFamily
from .denoise import LOOKUP_TOKENS, DenoiseOutput, ar_decode, banned_bias, eager_encode_every


def resolve_check(check: float | str | None, multiline: bool) -> tuple[float, float] | None:
    """(acceptance of the draft's tokens, of its <|eom|>) a request's `check` means at its cursor, None
    for no check. "auto" checks at a single-line cursor only: there the draft's misses are mostly a
    middle cut short, which AR's rest mends, so its end needs the higher DEFAULT_END_CHECK; at a
    multi-line cursor AR's rest of a body scored below the draft with the AR fallback, at several
    times the cost (benchmarks/check.py). An explicit acceptance holds for every token, the end too."""
    if check == "auto":
        return None if multiline else (DEFAULT_CHECK, DEFAULT_END_CHECK)
    return None if check is None else (check, check)


@dataclass
class CheckOutput:
    tokens: list[int]       # the middle: the draft tokens kept, then AR's
    kept: int               # how many of them are the draft's
    passes: int             # forward passes: the check's one, then one per AR token after the first
    deadline_hit: bool
    cancelled: bool


def kept_length(probs: torch.Tensor, draft: torch.Tensor, accept: float, end_id: int | None = None,
                accept_end: float | None = None) -> int:
    """How many leading draft tokens stand. probs: [N, V] AR's distribution at each draft position;
    draft: [N] ids. A token stands with probability >= accept (end_id: >= accept_end) or as AR's first
    choice."""
    p = probs.gather(-1, draft[:, None]).squeeze(-1)                            # [N]
    need = torch.full_like(p, accept)
    if end_id is not None and accept_end is not None:
        need = need.masked_fill(draft == end_id, accept_end)
    ok = (p >= need) | (probs.argmax(-1) == draft)
    return int(ok.long().cumprod(0).sum())


def check_draft(model: ModelFamily, kv, context_len: int, last_hidden: torch.Tensor, draft: list[int],
                accept: float, max_tokens: int, eom_id: int, banned: list[int] | None = None,
                first_bias: torch.Tensor | None = None, stop: Callable[[list[int]], bool] | None = None,
                token_step: Callable | None = None, encode_every: Callable | None = None,
                temperature: float = 0.0, top_p: float = 1.0,
                generator: torch.Generator | None = None, deadline: float | None = None,
                cancelled: Callable[[], bool] | None = None, accept_end: float | None = None,
                lookup: list[int] | None = None, lookup_tokens: int = LOOKUP_TOKENS) -> CheckOutput:
    """Check `draft` (the middle's tokens up to and including <|eom|>, no pads) against the causal
    path after the first context_len cached positions; last_hidden [1, D] predicts the middle's first
    token. kv needs room for context_len + max_tokens positions (those past context_len are scratch).
    The draft's <|eom|> stands with probability >= accept_end (None: accept).
    The kept tokens are cut after the first that makes stop(tokens) true, as AR would have stopped;
    the rest is ar_decode's, with the same banned ids, first-token bias, stop and sampling.
    encode_every(tokens [1, N], start, kv) -> [N, D] is the check's pass (compiled.py), the eager
    model's by default; token_step is AR's, as in ar_decode. lookup: the context's token ids, for the
    rest's prompt lookup of up to lookup_tokens a pass (ar_decode; greedy only)."""
    if encode_every is None:
        encode_every = eager_encode_every(model)
    draft = draft[:max_tokens]
    kept = 0
    states = last_hidden                       # row i predicts the middle's token i
    if draft:
        ids = torch.tensor([draft], dtype=torch.long, device=last_hidden.device)
        states = torch.cat([last_hidden, encode_every(ids, context_len, kv)])          # [N + 1, D]
        logits = model.logits(states[:-1]).float()                                      # [N, V]
        logits = logits + banned_bias(tuple(banned or ()), logits.shape[-1], logits.device)
        if first_bias is not None:
            logits[0] += first_bias.to(logits.dtype)
        kept = kept_length(torch.softmax(logits, -1), ids[0], accept, eom_id, accept_end)
        for i in range(kept):   # what AR would have stopped at stays the end
            if draft[i] == eom_id or (stop is not None and stop(draft[:i + 1])):
                return CheckOutput(draft[:i + 1], i + 1, 1, False, False)
    head = draft[:kept]
    if kept == max_tokens:
        return CheckOutput(head, kept, 1, False, False)
    rest: DenoiseOutput = ar_decode(
        model, kv, context_len + kept, states[kept:kept + 1], max_tokens - kept, eom_id, temperature, top_p, generator, banned,
        deadline, cancelled, first_bias if kept == 0 else None, token_step,
        None if stop is None else (lambda tokens: stop(head + tokens)),
        lookup=None if lookup is None else lookup + head, encode_every=encode_every, lookup_tokens=lookup_tokens)
    # ar_decode's first token comes from states[kept] with no pass of its own, and AR counts it as one (the
    # context's): with a draft the check's pass stands for that one (made even if AR then wrote none)
    passes = max(rest.steps_run, 1 if draft else 0)
    return CheckOutput(head + rest.span[0].tolist(), kept, passes, rest.deadline_hit, rest.cancelled)
