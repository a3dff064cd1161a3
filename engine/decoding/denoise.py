"""The span denoiser (DESIGN §5): L masks, T steps, commit the most confident positions each step.

Pure tensor functions (schedule, confidence, commit rules) are tested without a model; `denoise`
is the one place that owns the step loop. Following LLaDA (Nie et al. 2025, §2.4, "low-confidence
remasking") a committed token is never re-masked; following Fast-dLLM (Wu et al. 2025) the
threshold rule commits every position whose confidence clears τ, at least one per step. The
deadline turns the decoder into an anytime one: when the budget is spent, the next step is the last
and commits everything left.

Rules: `fixed` commits L/T positions per step, most confident first. Most of a span is `<|pad|>`
(a single-line middle is a few tokens in 32 positions) and pads are the most confident proposals, so
under `fixed` the first steps commit pads from the right end inward and the content is decided in the
last step or two, in parallel. `content` (the default) commits the confident trailing pads for free
and spreads the steps over what is left: each step commits ceil(n / steps left) of the n content
positions — the step budget goes to the tokens the user reads, and a span whose content is decided
early stops early. `threshold` is Fast-dLLM's.

Length (api.Length, DenoiseConfig.length): how the span decides where the middle ends. The
strategies' rules, <|eom|> truncation and the span cut are in length.py; `choose_commit`,
`step_body` and `denoise` apply them.
"""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Callable

import torch

from . import kernels
from ..core.family import ModelFamily
from .neighbours import pick_apart
from .length import (FIRST_STEP, PAD_CONFIDENCE, STRICT_PAD_CONFIDENCE, fix_end, held_ends, place_end, shrunk_length,
                     trailing_pads, truncate_after_eom)

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


def commit_spread(confidence: torch.Tensor, content: torch.Tensor, steps_left: torch.Tensor | int) -> torch.Tensor:
    """Commit ceil(n / steps_left) of each row's n content positions, most confident first: a per-row
    k, computed on the device (a rank test, no host sync, so it compiles and graph-captures)."""
    n = content.sum(1, keepdim=True)
    k = torch.div(n + steps_left - 1, steps_left, rounding_mode="floor")
    conf = confidence.masked_fill(~content, NEG_INF)
    # each position's place in a stable descending sort, by counting who goes first: L x L
    # comparisons, which compile into one fused loop where a sort would be a library call
    index = torch.arange(conf.shape[1], device=conf.device)
    mine, other = conf[:, :, None], conf[:, None, :]
    ahead = (other > mine) | ((other == mine) & (index[None, :] < index[:, None]))
    return content & (ahead.sum(2) < k)


def commit_content(span: torch.Tensor, masked: torch.Tensor, confidence: torch.Tensor, proposal: torch.Tensor,
                   steps_left: torch.Tensor | int, pad: int, pad_confidence: float = PAD_CONFIDENCE,
                   held: torch.Tensor | None = None) -> torch.Tensor:
    """The `content` rule: the span's confident trailing pads, plus the content share of this step,
    most confident first; `held` positions (a length strategy's) wait, and the share goes to others."""
    tail = trailing_pads(span, masked, confidence, proposal, pad, pad_confidence)
    if held is None:
        return tail | commit_spread(confidence, masked & ~tail, steps_left)
    behind = torch.where(held, confidence - 2, confidence)     # below any probability, order kept
    return tail | (commit_spread(behind, masked & ~tail, steps_left) & ~held)



def commit_threshold(confidence: torch.Tensor, masked: torch.Tensor, threshold: float) -> torch.Tensor:
    """Commit every masked position with confidence > threshold, and at least the best one per row."""
    if kernels.enabled_for(confidence):
        return kernels.commit(confidence, masked, 1, threshold)
    return (masked & (confidence > threshold)) | commit_topk(confidence, masked, 1)



@dataclass
class DenoiseConfig:
    span_length: int
    steps: int
    rule: str = "content"
    threshold: float = 0.9
    temperature: float = 0.0
    top_p: float = 1.0
    banned: list[int] | None = None
    greedy_first: bool = False     # with temperature > 0: candidate 0 is the greedy one, the rest sampled
    first_bias: torch.Tensor | None = None   # [V] added to the first position's logits (healing.py)
    shrink_to: tuple[int, ...] = ()   # span lengths to cut a span down to once its tail is committed pads
    length: str = "pad"               # how the middle's end is decided (api.LENGTHS, `auto` resolved: length.resolve_length)
    end: int | None = None            # <|eom|>'s position, committed before the first step (`head`); >= L: none
    repeatable: torch.Tensor | None = None   # [V] bool: no other token twice in a row (neighbours.py); None: no such rule


def choose_commit(span: torch.Tensor, masked: torch.Tensor, confidence: torch.Tensor, proposal: torch.Tensor,
                  left: torch.Tensor | int, k: int, rule: str, threshold: float, pad: int,
                  length: str = "pad", eom: int | None = None) -> torch.Tensor:
    """[B, L] bool: the positions this step commits under `rule`, with `left` steps left (this one
    included) and `k` the fixed schedule's count; on the final step (left == 1) everything left.
    Under `content`, left may be a tensor (the compiled step's): its rank test needs no branch.
    `length` (with the <|eom|> id) is the length strategy's part: `strict-pad`'s trailing pads, the
    end tokens `late-end` and `left-end` hold back (never on the final step)."""
    held = None
    if length in ("late-end", "left-end"):
        held = held_ends(masked, confidence, proposal, length, eom, pad) & (left > 1)
    if rule == "content":   # left == 1 takes all
        pad_confidence = STRICT_PAD_CONFIDENCE if length == "strict-pad" else PAD_CONFIDENCE
        return commit_content(span, masked, confidence, proposal, left, pad, pad_confidence, held)
    if left == 1:
        return masked.clone()
    free = masked if held is None else masked & ~held
    if rule == "threshold":
        return commit_threshold(confidence, free, threshold)
    return commit_topk(confidence, free, k)


def apply_commit(span: torch.Tensor, masked: torch.Tensor, commit: torch.Tensor, proposal: torch.Tensor,
                 eom: int, pad: int) -> None:
    span.copy_(torch.where(commit, proposal, span))
    masked &= ~commit
    truncate_after_eom(span, masked, eom, pad)


@dataclass(frozen=True)
class Step:
    k: int        # positions the fixed schedule commits at this step
    left: int     # steps left, this one included: 1 on the final step, which commits everything left

    @property
    def final(self) -> bool:
        return self.left == 1

    def key(self, rule: str) -> tuple:
        """What `choose_commit` reads of this step under `rule`: steps with equal keys commit alike,
        so a captured step (cuda_step's CUDA graphs) is shared between them."""
        if self.final:
            return ("final",)
        return {"fixed": ("k", self.k), "content": ("left", self.left)}.get(rule, ())


def passed(deadline: float | None) -> bool:
    """Whether a request's deadline (time.perf_counter() seconds; None: none) has passed."""
    return deadline is not None and time.perf_counter() >= deadline


class StepPlan:
    """The steps of one request: the last one (or the first after the deadline has passed) is final.
    Iteration stops when `cancelled()` turns true; afterwards `deadline_hit` and `was_cancelled` say
    what happened."""

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
            left = len(self.schedule) - step
            if left > 1 and passed(self.deadline):
                left, self.deadline_hit = 1, True
            yield Step(k, left)


@dataclass
class DenoiseOutput:
    span: torch.Tensor     # [B, L] committed tokens
    steps_run: int
    deadline_hit: bool
    cancelled: bool


@functools.lru_cache(maxsize=64)
def banned_bias(banned: tuple[int, ...], vocab_size: int, device: torch.device) -> torch.Tensor:
    """[V] float: -inf on the banned ids, 0 elsewhere; added to the logits. Cached, so it is made once
    per set of ids and device (never inside a captured CUDA graph), and a compiled step sees the same
    tensor every time (an inference tensor, as the compiled steps' guards expect)."""
    with torch.inference_mode():
        bias = torch.zeros(vocab_size, device=device)
        if banned:
            bias[list(banned)] = NEG_INF
    return bias


def greedy(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return pick_tokens(logits)


def sampler(cfg: DenoiseConfig, generator: torch.Generator | None, n: int):
    """pick(logits [n*L, V]) for cfg's temperature: greedy, a sample, or (greedy_first) greedy for
    candidate 0's rows and a sample for the others'. L is read from the logits: after a span cut it
    is shorter than cfg.span_length."""
    if cfg.temperature <= 0:
        return greedy

    def pick(logits):
        if not cfg.greedy_first:
            return pick_tokens(logits, cfg.temperature, cfg.top_p, generator)
        L = logits.shape[0] // n
        conf0, tok0 = pick_tokens(logits[:L])
        conf1, tok1 = pick_tokens(logits[L:], cfg.temperature, cfg.top_p, generator)
        return torch.cat([conf0.float(), conf1.float()]), torch.cat([tok0, tok1])
    return pick


def step_body(model: ModelFamily, span: torch.Tensor, masked: torch.Tensor, context_len: int, kv,
              left: torch.Tensor | int, k: int, bias: torch.Tensor, first_bias: torch.Tensor, rule: str,
              threshold: float, eom: int, pad: int, pick=greedy,
              positions: torch.Tensor | None = None, key_mask: torch.Tensor | None = None,
              length: str = "pad", repeatable: torch.Tensor | None = None) -> None:
    """One denoising step, in place on span/masked [B, L]: the span's forward against the cached
    context, logits for every position with the banned ids' bias [V] and token healing's first_bias
    [V] on position 0, a pick per position, then the commit. The one step body: `denoise` runs it
    eagerly, compiled.py through torch.compile, cuda_step.py captured in CUDA graphs. Every position's
    logits, not only the masked ones': no data-dependent shapes, so it compiles and graph-captures.
    `length` is the length strategy (api.LENGTHS, `auto` resolved: length.resolve_length); the compiled and captured steps run `pad`.
    `repeatable` [V] bool: the picks are made with no token twice in a row (neighbours.py), these
    tokens excepted; None: each position's pick on its own."""
    B, L = span.shape
    logits = model.logits(model.span_step(span, context_len, kv, positions, key_mask)).float() + bias   # [B, L, V]
    logits[:, 0] += first_bias
    if length in FIRST_STEP:
        fix_end(logits, span, masked, eom, pad, FIRST_STEP[length])
    if repeatable is None:
        conf, token = pick(logits.flatten(0, 1))
        conf, token = conf.view(B, L), token.view(B, L)
    else:
        conf, token = pick_apart(logits, span, masked, repeatable, pick)
    confidence = conf.masked_fill(~masked, NEG_INF)
    proposal = torch.where(masked, token, span)
    commit = choose_commit(span, masked, confidence, proposal, left, k, rule, threshold, pad, length, eom)
    apply_commit(span, masked, commit, proposal, eom, pad)


def denoise(model: ModelFamily, kv, context_len: int, n: int, cfg: DenoiseConfig, mask_id: int,
            eom_id: int, pad_id: int, generator: torch.Generator | None = None,
            deadline: float | None = None, cancelled: Callable[[], bool] | None = None,
            fused_step: Callable | None = None) -> DenoiseOutput:
    """Denoise n candidate spans against the cached context kv[:, :, :context_len]: the one step
    loop. fused_step(span, masked, context_len, kv, steps_left), in place, runs `step_body` compiled
    for greedy decoding with the `content` rule (compiled.py; steps_left = 1 on the final step)."""
    device = model.embed.weight.device
    L = cfg.span_length
    span = torch.full((n, L), mask_id, dtype=torch.long, device=device)
    masked = torch.ones(n, L, dtype=torch.bool, device=device)
    if cfg.end is not None:
        place_end(span, masked, cfg.end, eom_id, pad_id)
    bias = banned_bias(tuple(cfg.banned or ()), model.cfg.vocab_size, device)
    first_bias = cfg.first_bias.float() if cfg.first_bias is not None else torch.zeros_like(bias)
    pick = sampler(cfg, generator, n)
    plan = StepPlan(L, cfg.steps, deadline, cancelled)
    steps_run = 0
    if not masked.any():         # an end placed at 0: nothing to decode
        return DenoiseOutput(span, 0, False, False)
    for step in plan:
        if cfg.shrink_to:        # before every step: a placed end shrinks the span before the first
            n_keep = shrunk_length(span, masked, pad_id, cfg.shrink_to)
            if n_keep < span.shape[1]:
                # fresh strides: a slice of a one-row span counts as contiguous but keeps the row
                # stride of 32 (.contiguous() and .clone() keep it), and the compiled step guards on strides
                fresh = torch.contiguous_format
                span = span[:, :n_keep].clone(memory_format=fresh)
                masked = masked[:, :n_keep].clone(memory_format=fresh)
        steps_run += 1
        if fused_step is not None:
            fused_step(span, masked, context_len, kv, step.left)
        else:
            step_body(model, span, masked, context_len, kv, step.left, step.k, bias, first_bias, cfg.rule,
                      cfg.threshold, eom_id, pad_id, pick, length=cfg.length, repeatable=cfg.repeatable)
        if step.final or not masked.any():   # done: the plan is not asked again (no cancel or deadline after it)
            break
    return DenoiseOutput(span, steps_run, plan.deadline_hit, plan.was_cancelled)


# prompt lookup (greedy AR only): after each token, the tokens that followed its last earlier occurrence
# in the context and the middle so far are proposed, and one pass over the token and up to this many of
# them gives AR's choice after each; the proposals AR would have written stand without a pass of their
# own. Code repeats itself (names, calls, whole lines), and on a CPU a pass over 5 tokens costs little
# more than over 1 (its fixed cost per call dominates)
LOOKUP_TOKENS = 4


def eager_encode_every(model: ModelFamily) -> Callable:
    """The eager model's encode_every(tokens [1, N], start, kv) -> [N, D]: each new token's hidden state
    (the AR check's pass, prompt lookup's), where no compiled one is given."""
    def encode_every(tokens, start, kv):
        return model.encode_context(tokens, start, kv, every=True)
    return encode_every


def lookup_proposal(seq: list[int], k: int) -> list[int]:
    """Up to k tokens that followed the last earlier occurrence of seq's last token; [] where it has none."""
    if k <= 0 or not seq:
        return []
    last = seq[-1]
    for i in range(len(seq) - 2, -1, -1):
        if seq[i] == last:
            return seq[i + 1:i + 1 + k]
    return []


def ar_decode(model: ModelFamily, kv, context_len: int, last_hidden: torch.Tensor, max_tokens: int,
              eom_id: int, temperature: float = 0.0, top_p: float = 1.0,
              generator: torch.Generator | None = None, banned: list[int] | None = None, deadline: float | None = None,
              cancelled: Callable[[], bool] | None = None, first_bias: torch.Tensor | None = None,
              token_step: Callable | None = None, stop: Callable[[list[int]], bool] | None = None,
              lookup: list[int] | None = None, encode_every: Callable | None = None,
              lookup_tokens: int = LOOKUP_TOKENS) -> DenoiseOutput:
    """The baseline: decode the same weights one token per step through the causal path. kv buffers
    must have room for context_len + max_tokens positions; positions past context_len are scratch.
    first_bias [V] is added to the first token's logits (healing.py); token_step(token [1, 1],
    position, kv) -> logits [1, V] is the causal step (compiled.py), the eager model's by default.
    Decoding ends after <|eom|> or once stop(tokens so far) is true (they stay in the span: the caller cuts).
    lookup: the token ids before the middle (the context); greedy decoding then proposes what followed
    the last token's last earlier occurrence (up to lookup_tokens; 0: none) and checks it in the same pass
    (encode_every(tokens [1, N], start, kv) -> [N, D], the eager model's by default): the same tokens in
    fewer passes (with int8 matmuls a pass's rows share one activation scale, so a token's logits may round
    differently than in a pass of its own). steps_run counts the passes, the first token's (the
    context's) included."""
    if token_step is None:
        def token_step(token, position, kv):
            return model.logits(model.encode_context(token, position, kv))
    if encode_every is None:
        encode_every = eager_encode_every(model)
    use_lookup = lookup is not None and temperature == 0.0
    tokens: list[int] = []
    logits = model.logits(last_hidden)                                # [1, V]
    proposed: list[int] = []              # proposals not yet reached, the first at the next token's position
    ahead: list[torch.Tensor] = []        # the pass's logits after each of them
    passes = 1
    deadline_hit = was_cancelled = False
    for i in range(max_tokens):
        if cancelled is not None and cancelled():
            was_cancelled = True
            break
        if i == 0 and first_bias is not None:
            logits = logits + first_bias.to(logits.dtype)
        _, token = pick_tokens(logits, temperature, top_p, generator, banned)
        tokens.append(int(token))
        if tokens[-1] == eom_id or (stop is not None and stop(tokens)):
            break
        if passed(deadline):
            deadline_hit = True
            break
        if i + 1 >= max_tokens:
            break
        if proposed and tokens[-1] == proposed[0]:     # AR wrote the proposal: its pass already ran
            proposed.pop(0)
            logits = ahead.pop(0)
            continue
        # proposals AR can still reach: the pass's last row gives token max_tokens - 1 at most
        proposal = lookup_proposal(lookup + tokens, min(lookup_tokens, max_tokens - 1 - i - 1)) if use_lookup else []
        passes += 1
        if proposal:
            ids = torch.tensor([tokens[-1:] + proposal], dtype=torch.long, device=last_hidden.device)
            rows = model.logits(encode_every(ids, context_len + i, kv))     # [1 + k, V]
            logits, ahead, proposed = rows[:1], [rows[j:j + 1] for j in range(1, len(proposal) + 1)], proposal
        else:
            logits, ahead, proposed = token_step(token[None], context_len + i, kv), [], []
    span = torch.tensor([tokens], dtype=torch.long)
    return DenoiseOutput(span, passes if tokens else 0, deadline_hit, was_cancelled)
