"""The engine's public request/result types and limits. No torch here: the server validates its
settings against these without loading a model."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Literal, get_args

from .decoding.prompt import Snippet, check_window_ids

Mode = Literal["diffusion", "ar"]
Rule = Literal["content", "fixed", "threshold"]
RULES: tuple[str, ...] = get_args(Rule)
# how the span decides where the middle ends (decoding/length.py's docstring): `auto` picks `head` at a
# multi-line cursor for a model with a length head and `pad` otherwise; end tokens commit like any other,
# stricter trailing pads, end tokens held back (until sure; until all before them is decided), the
# <|eom|> position fixed by the first step's distribution (mode, mean, median), or by the model's
# length head before the first step (models trained with one)
Length = Literal["auto", "pad", "strict-pad", "late-end", "left-end", "first-step", "first-step-mean",
                 "first-step-median", "head"]
LENGTHS: tuple[str, ...] = get_args(Length)
DEFAULT_LENGTH: Length = "auto"
MAX_STEPS = 128                            # the most denoising steps T a setting or a shipped model may ask for
MAX_SPAN = 256                             # the longest span L a request may ask for
DEFAULT_CHECK = 0.03                       # CompletionRequest.check="auto" at a single-line cursor (benchmarks/check.py)
DEFAULT_END_CHECK = 0.3                    # and for the draft's <|eom|>: the draft ends a middle early more often than AR
CHECKED_STEPS = 2                          # T of a draft the AR check reads, where the request names none: with the
                                           # check, as good as the model's 4 at two span steps less (benchmarks/check.py)
MAX_CANDIDATES = 16                        # the most candidates n decoded as one batch
MIN_TEMPERATURE, MAX_TEMPERATURE = 1e-4, 1e4   # a sampled request's: logits / temperature stay finite
DTYPES: tuple[str, ...] = ("auto", "bf16", "bfloat16", "fp32", "float32", "fp16", "float16", "int8")


@dataclass
class CompletionRequest:
    prefix: str                          # text before the cursor (already windowed or not: see `cut`)
    suffix: str                          # text after the cursor
    snippets: list[Snippet] = field(default_factory=list)   # other files, most relevant first
    snippet_tokens: int | None = None    # the most tokens the snippets take, their headers included; None =
                                         # the model's snippet budget (never more than it)
    span_length: int | None = None       # L; None = the model's default, started on SINGLE_LINE_SPAN (16) at a
                                         # single-line cursor (length.start_span: a middle there ends within 15
                                         # tokens unless the AR check or fallback writes on)
    steps: int | None = None             # T; None = the model's default (at most CHECKED_STEPS where the AR check runs)
    mode: Mode = "diffusion"
    rule: Rule = "content"               # how a step picks what to commit (denoise.py): "content" spreads
                                         # the steps over the non-pad positions, "fixed" commits L/T per
                                         # step, "threshold" every position above `threshold`
    threshold: float = 0.9
    length: Length = DEFAULT_LENGTH      # how the middle's end is decided (LENGTHS)
    n: int = 1                           # candidates, decoded as one batch
    temperature: float = 0.0             # 0 = greedy
    top_p: float = 1.0
    seed: int | None = None
    greedy_first: bool = False           # with temperature > 0: candidate 0 greedy, others sampled (n = 1: greedy)
    deadline_ms: float | None = None     # time budget; when spent, everything left commits at once
    cut: bool = True                     # cut prefix/suffix windows to the model's token budget
    prefix_ids: list[int] | None = None  # with cut=False, the token ids of exactly `prefix` and `suffix` where
    suffix_ids: list[int] | None = None  # the caller has them (Tokenizer.encode_cached): not encoded again
    heal: bool = True                    # token healing of a cursor inside a word (healing.py)
    shrink_span: bool = True             # content rule: later steps run on a shorter span once its tail
                                         # is all pad (decoding/length.py); False for A/B measurements
    fast_steps: bool = True              # the compiled CPU steps / CUDA graphs where they apply; False runs
                                         # the eager reference loop (A/B measurements)
    cancelled: Callable[[], bool] | None = None  # polled between steps; True stops the request
    check: float | Literal["auto"] | None = "auto"   # the AR path of the same weights checks diffusion's draft
                                         # (decoding/check.py): a draft token stands with AR probability >= check
                                         # (or as AR's first choice), AR writes the rest from the first that does
                                         # not; None: the draft as it is; "auto": DEFAULT_CHECK at a single-line
                                         # cursor (DEFAULT_END_CHECK for the draft's end), None at a multi-line
                                         # one. Models without an AR path skip it
    would_show: Callable[[str], bool] | None = None   # whether the caller would show a candidate (the server:
                                         # postprocess.Shown.would_show: post-processing, the Python gate, and at
                                         # a multi-line cursor enough of it); a diffusion request with none it
                                         # would show is decoded again by AR (one greedy candidate), unless it
                                         # wrote nothing at a single-line cursor; an AR text the deadline cut
                                         # short that the caller would not show either leaves diffusion's


@dataclass
class Timings:
    """Where one request's time went, in milliseconds."""
    tokenize_ms: float = 0.0             # windows, token ids, healing
    context_ms: float = 0.0              # the context's keys/values: the cache's reuse and the prefill
    denoise_ms: float = 0.0              # the span's steps (or AR's tokens)
    detokenize_ms: float = 0.0
    check_ms: float = 0.0                # the AR check of diffusion's draft and AR's rest of the middle
    fallback_ms: float = 0.0             # AR decoding after a diffusion result the caller would not show
    total_ms: float = 0.0


@dataclass
class CompletionResult:
    texts: list[str]                     # one per candidate (one, AR's, where it fell back); text to insert at the cursor
    context_tokens: int                  # length of the causal context
    reused_tokens: int                   # context tokens served from the KV cache
    encoded_tokens: int                  # context tokens encoded for this request
    steps_run: int                       # forward passes over the span (or AR's passes: a token each, fewer with prompt lookup; the AR fallback's added)
    finished: list[bool]                 # candidate ended with <|eom|>
    deadline_hit: bool = False
    cancelled: bool = False
    timings: Timings = field(default_factory=Timings)
    fell_back: bool = False              # diffusion's candidates were none the caller would show: AR's text instead
    kept_tokens: list[int] = field(default_factory=list)   # per candidate, how many of its leading tokens are
                                         # diffusion's draft that the AR check kept (empty: no check ran)
    check_passes: int = 0                # the AR check's forward passes (its pass over the drafts, AR's tokens after)

    @property
    def forward_passes(self) -> int:
        """Every forward pass the request ran: the span's steps or AR's passes, the check's, the fallback's."""
        return self.steps_run + self.check_passes


def _integer(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_ids(name: str, ids, vocab_size: int | None) -> None:
    if ids is None:
        return
    if not isinstance(ids, list) or not all(map(_integer, ids)):
        raise ValueError(f"{name} must be a list of token ids (integers)")
    if vocab_size is not None and ids and not 0 <= min(ids) <= max(ids) < vocab_size:
        raise ValueError(f"{name} holds ids outside the model's vocabulary 0..{vocab_size - 1}: "
                         f"{min(ids)}..{max(ids)}")


def check_request(req: CompletionRequest, span_length: int, steps: int,
                  modes: tuple[str, ...] = ("diffusion", "ar"), why: str = "",
                  vocab_size: int | None = None) -> tuple[int, int]:
    """(L, T) for `req`, None filled in with the model's span_length and steps; ValueError naming the
    value that is out of range or of the wrong type. `modes` are the decodings the engine has (`why`
    says why not others); `vocab_size` bounds prefix_ids and suffix_ids."""
    if not isinstance(req.prefix, str) or not isinstance(req.suffix, str):
        raise ValueError(f"prefix and suffix must be strings, not {type(req.prefix).__name__} and "
                         f"{type(req.suffix).__name__}")
    if not isinstance(req.snippets, list) or not all(
            isinstance(s, Snippet) and isinstance(s.path, str) and isinstance(s.text, str) for s in req.snippets):
        raise ValueError("snippets must be a list of Snippet(path, text), path and text strings")
    if req.snippet_tokens is not None and (not _integer(req.snippet_tokens) or req.snippet_tokens < 0):
        raise ValueError(f"snippet_tokens={req.snippet_tokens!r} must be a number of tokens (0 or more), or None")
    L = span_length if req.span_length is None else req.span_length
    T = steps if req.steps is None else req.steps
    if not _integer(L) or not 1 <= L <= MAX_SPAN:
        raise ValueError(f"span_length={L!r} is out of range; use an integer 1..{MAX_SPAN}")
    if not _integer(T) or not 1 <= T <= MAX_STEPS:
        raise ValueError(f"steps={T!r} is out of range; use an integer 1..{MAX_STEPS}")
    if not _integer(req.n) or not 1 <= req.n <= MAX_CANDIDATES:
        raise ValueError(f"n={req.n!r} candidates is out of range; use an integer 1..{MAX_CANDIDATES}")
    if req.seed is not None and (not _integer(req.seed) or not -2**63 <= req.seed < 2**64):
        raise ValueError(f"seed={req.seed!r} must be an integer from -2**63 to 2**64 - 1, or None")
    if req.deadline_ms is not None and not (_finite(req.deadline_ms) or req.deadline_ms == math.inf):
        raise ValueError(f"deadline_ms={req.deadline_ms!r} must be a number of milliseconds, or None")
    if not _finite(req.threshold):     # above 1 nothing clears it, below 0 everything does
        raise ValueError(f"threshold={req.threshold!r} must be a number (a probability from 0 to 1)")
    if req.mode not in modes:
        raise ValueError(f"mode={req.mode!r} is not available{why}; use {' or '.join(map(repr, modes))}")
    if req.rule not in RULES:
        raise ValueError(f"rule={req.rule!r} is unknown; use one of {', '.join(map(repr, RULES))}")
    if req.length not in LENGTHS:
        raise ValueError(f"length={req.length!r} is unknown; use one of {', '.join(map(repr, LENGTHS))}")
    if req.check not in (None, "auto") and (not isinstance(req.check, (int, float)) or isinstance(req.check, bool)
                                           or not 0 <= req.check <= 1):
        raise ValueError(f"check={req.check!r} must be a probability from 0 to 1, 'auto' (the default), or None "
                         "to show diffusion's draft unchecked")
    if not _finite(req.temperature) or not _finite(req.top_p) or not 0 < req.top_p <= 1 or not (
            req.temperature == 0 or MIN_TEMPERATURE <= req.temperature <= MAX_TEMPERATURE):
        raise ValueError(f"temperature={req.temperature!r} must be 0 (greedy) or from {MIN_TEMPERATURE} to "
                         f"{MAX_TEMPERATURE:g} (logits divided by a smaller or larger one overflow), and "
                         f"top_p={req.top_p!r} in (0, 1]")
    flags = {"greedy_first": req.greedy_first, "cut": req.cut, "heal": req.heal, "shrink_span": req.shrink_span,
             "fast_steps": req.fast_steps}
    for name, value in flags.items():      # a string such as "false" would read as true
        if not isinstance(value, bool):
            raise ValueError(f"{name}={value!r} must be True or False")
    for name, value in (("cancelled", req.cancelled), ("would_show", req.would_show)):
        if value is not None and not callable(value):
            raise ValueError(f"{name}={value!r} must be a function or None")
    check_window_ids(req.cut, req.prefix_ids, req.suffix_ids)
    _check_ids("prefix_ids", req.prefix_ids, vocab_size)
    _check_ids("suffix_ids", req.suffix_ids, vocab_size)
    return L, T


def begin(req: CompletionRequest) -> tuple[float, float | None]:
    """(start time, deadline) of a request that is about to run; CancelledError if it was cancelled
    before any work was done. Times are time.perf_counter() seconds."""
    start = time.perf_counter()
    if req.cancelled is not None and req.cancelled():
        raise CancelledError("request was cancelled before it started")
    return start, (start + req.deadline_ms / 1e3 if req.deadline_ms is not None else None)


class CancelledError(Exception):
    """Raised by Engine.complete when request.cancelled() turns true before any work was done."""
