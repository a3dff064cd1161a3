"""The AR check of diffusion's draft (decoding/check.py, CompletionRequest.check): which draft tokens
stand, that AR writes the rest exactly as AR alone would from there, and the engine's use of it."""
import pytest
import torch

from spanfill.engine import CompletionRequest
from spanfill.engine import CHECKED_STEPS, DEFAULT_CHECK, DEFAULT_END_CHECK
from spanfill.engine.decoding.check import check_draft, kept_length, resolve_check
from spanfill.engine.decoding.denoise import ar_decode
from spanfill.engine.decoding.prompt import context_ids

PREFIX = "def add(a, b):\n    return a + "
SUFFIX = "\n\nprint(add(1, 2))\n"


def test_kept_length_keeps_the_leading_tokens_ar_finds_plausible_or_ranks_first():
    probs = torch.tensor([[0.70, 0.20, 0.10],
                          [0.50, 0.45, 0.05],
                          [0.90, 0.05, 0.05],
                          [0.10, 0.10, 0.80]])
    assert kept_length(probs, torch.tensor([1, 1, 0, 2]), 0.1) == 4      # 0.20, 0.45, first choice, first choice
    assert kept_length(probs, torch.tensor([1, 1, 1, 2]), 0.1) == 2      # 0.05 < 0.1: the rest goes too
    assert kept_length(probs, torch.tensor([1, 0, 0, 2]), 0.5) == 0      # 0.20 < 0.5 and not the first choice
    assert kept_length(probs, torch.tensor([0, 0, 0, 2]), 1.0) == 4      # accept 1: AR's own choices only
    assert kept_length(probs, torch.tensor([2, 2, 2, 0]), 0.0) == 4      # accept 0: the whole draft


def test_the_drafts_end_can_need_a_higher_acceptance():
    probs = torch.tensor([[0.70, 0.20, 0.10],
                          [0.60, 0.15, 0.25],
                          [0.10, 0.20, 0.70]])
    end = 2
    assert kept_length(probs, torch.tensor([1, 2, 0]), 0.1) == 3                 # 0.20, the end at 0.25
    assert kept_length(probs, torch.tensor([1, 2, 0]), 0.1, end, 0.3) == 1       # the end at 0.25 < 0.3
    assert kept_length(probs, torch.tensor([1, 1, 2]), 0.1, end, 0.3) == 3       # the end as AR's first choice
    assert kept_length(probs, torch.tensor([1, 0, 0]), 0.1, end, 0.9) == 3       # only the end is held higher


@pytest.fixture
def context(engine):
    """(model, kv, context length, last hidden, eom, banned) of PREFIX/SUFFIX, prefilled."""
    tok, model = engine.tokenizer, engine.model
    sp = tok.special
    ids = context_ids(tok, PREFIX, SUFFIX, budget=engine.budget)
    kv = model.allocate_kv(len(ids) + 40)
    with torch.inference_mode():
        last = model.encode_context(torch.tensor([ids]), 0, kv)
    return model, kv, len(ids), last, sp.eom, [sp.pad, sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle]


def test_encode_context_every_gives_each_new_tokens_hidden_state(engine, context):
    model, kv, C, _, _, _ = context
    tokens = [5, 9, 14, 3]
    with torch.inference_mode():
        every = model.encode_context(torch.tensor([tokens]), C, kv, every=True)
        one_by_one = torch.cat([model.encode_context(torch.tensor([[t]]), C + i, kv) for i, t in enumerate(tokens)])
    assert every.shape == (4, model.cfg.dim)
    torch.testing.assert_close(every, one_by_one, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("draft", [[], [7], [7, 12, 30, 4, 19, 22], list(range(40, 60))])
def test_accept_one_writes_what_ar_alone_writes_whatever_the_draft(context, draft):
    """accept = 1 keeps only AR's own first choices, so the middle is AR's, token for token."""
    model, kv, C, last, eom, banned = context
    with torch.inference_mode():
        alone = ar_decode(model, kv, C, last, 24, eom, banned=banned).span[0].tolist()
        checked = check_draft(model, kv, C, last, draft, 1.0, 24, eom, banned)
    assert checked.tokens == alone
    assert checked.tokens[:checked.kept] == draft[:checked.kept]


def test_ars_own_text_as_the_draft_is_kept_whole_in_one_pass(context):
    model, kv, C, last, eom, banned = context
    with torch.inference_mode():
        alone = ar_decode(model, kv, C, last, 10, eom, banned=banned).span[0].tolist()
        checked = check_draft(model, kv, C, last, alone, 1.0, 10, eom, banned)
    assert checked.tokens == alone and checked.kept == len(alone) and checked.passes == 1


def test_accept_zero_keeps_a_finished_draft_and_ar_finishes_an_unfinished_one(context):
    model, kv, C, last, eom, banned = context
    with torch.inference_mode():
        finished = check_draft(model, kv, C, last, [7, 12, eom], 0.0, 24, eom, banned)
        assert finished.tokens == [7, 12, eom] and finished.kept == 3 and finished.passes == 1
        unfinished = check_draft(model, kv, C, last, [7, 12], 0.0, 24, eom, banned)
        # AR's rest from the kept draft: the same as AR after a context that ends with those tokens
        h = model.encode_context(torch.tensor([[7, 12]]), C, kv)
        rest = ar_decode(model, kv, C + 2, h, 22, eom, banned=banned).span[0].tolist()
    assert unfinished.kept == 2 and unfinished.tokens == [7, 12] + rest
    assert unfinished.passes == len(rest)      # the check's pass made AR's first token


def test_a_drafts_end_below_accept_end_is_written_on_by_ar(context):
    model, kv, C, last, eom, banned = context
    with torch.inference_mode():
        out = check_draft(model, kv, C, last, [7, 12, eom], 0.0, 24, eom, banned, accept_end=1.0)
        h = model.encode_context(torch.tensor([[7, 12]]), C, kv)
        ends_first = int(model.logits(h).float().argmax()) == eom        # AR's own choice after [7, 12]
        rest = ar_decode(model, kv, C + 2, h, 22, eom, banned=banned).span[0].tolist()
    if ends_first:
        assert out.tokens == [7, 12, eom] and out.kept == 3
    else:
        assert out.kept == 2 and out.tokens == [7, 12] + rest


def test_a_kept_token_that_stops_ar_ends_the_middle(context):
    model, kv, C, last, eom, banned = context
    with torch.inference_mode():
        out = check_draft(model, kv, C, last, [7, 12, 30, 4, eom], 0.0, 24, eom, banned, stop=lambda t: t[-1] == 12)
    assert out.tokens == [7, 12] and out.kept == 2


def test_the_engine_with_accept_one_shows_ar_modes_text(engine):
    for prefix, suffix in ((PREFIX, SUFFIX), ("def f(x):\n    ", "\n\nf(1)\n"), ("total = compute(", ")\nprint(total)\n")):
        ar = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, mode="ar"))
        checked = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, check=1.0))
        assert checked.texts == ar.texts
        assert checked.kept_tokens and checked.timings.check_ms > 0


def test_the_engine_without_a_check_shows_the_draft(engine):
    T = engine.model.cfg.steps      # named, so both run the same draft (a checked one runs CHECKED_STEPS otherwise)
    plain = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, check=None, steps=T))
    lenient = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, check=0.0, steps=T))
    assert plain.kept_tokens == [] and plain.timings.check_ms == 0.0
    assert 1 <= plain.steps_run <= engine.model.cfg.steps
    if plain.finished[0]:              # a finished draft that every probability clears stands as it is
        assert lenient.texts == plain.texts and lenient.steps_run == plain.steps_run and lenient.check_passes == 1


def test_every_candidate_is_checked(engine):
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, n=3, temperature=0.8, seed=1, check=0.1))
    assert len(result.texts) == 3 and len(result.kept_tokens) == 3


def test_candidates_the_deadline_finds_unchecked_stay_drafts(engine, monkeypatch):
    """Each candidate's check is a forward pass: once the deadline has passed, the rest are not checked
    (with n=16 that was 15 passes past it), and the result says the deadline was hit."""
    import time
    from spanfill.engine import engine as engine_module
    calls = []

    def slow_check(*args, **kwargs):
        calls.append(1)
        out = check_draft(*args, **kwargs)
        time.sleep(2.1)                   # past the request's deadline
        return out
    engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, n=4, temperature=0.8, seed=1))   # warm
    monkeypatch.setattr(engine_module, "check_draft", slow_check)
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, n=4, temperature=0.8, seed=1, check=0.1,
                                               steps=CHECKED_STEPS, deadline_ms=2000))
    assert len(calls) == 1 and len(result.texts) == 4 and result.deadline_hit
    assert result.kept_tokens[1:] == [0, 0, 0]          # none of theirs was kept by a check
    unchecked = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, n=4, temperature=0.8, seed=1, check=None,
                                                  steps=CHECKED_STEPS))
    assert result.texts[1:] == unchecked.texts[1:]      # the drafts as they were


def test_auto_checks_at_a_single_line_cursor_only(engine):
    assert resolve_check("auto", multiline=False) == (DEFAULT_CHECK, DEFAULT_END_CHECK)
    assert resolve_check("auto", multiline=True) is None
    assert resolve_check(0.5, multiline=True) == (0.5, 0.5) and resolve_check(None, multiline=False) is None
    single = engine.complete(CompletionRequest(prefix="total = compute(", suffix=")\nprint(total)\n"))
    block = engine.complete(CompletionRequest(prefix="def f(x):\n    ", suffix="\n\nf(1)\n"))
    assert len(single.kept_tokens) == 1 and single.check_passes >= 1
    assert block.kept_tokens == [] and block.check_passes == 0


def test_a_checked_draft_runs_checked_steps_unless_the_request_names_its_steps(engine, monkeypatch):
    steps = []                      # the T each request's span was denoised with
    denoise = engine._diffusion
    monkeypatch.setattr(engine, "_diffusion", lambda entry, C, L, T, *rest: steps.append(T) or denoise(entry, C, L, T, *rest))
    T = engine.model.cfg.steps
    assert T > CHECKED_STEPS
    single = {"prefix": "total = compute(", "suffix": ")\nprint(total)\n"}     # `auto` checks here
    multi = {"prefix": "def f(x):\n    ", "suffix": "\n\nf(1)\n"}           # and not here
    for cursor, request in ((single, {}), (single, {"check": 0.5}), (single, {"check": None}), (single, {"steps": T}),
                            (multi, {}), (multi, {"check": 0.5})):
        engine.complete(CompletionRequest(**cursor, **request))
    assert steps == [CHECKED_STEPS, CHECKED_STEPS, T, T, T, CHECKED_STEPS]


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "always"])
def test_a_check_that_is_not_a_probability_gets_a_clear_error(engine, bad):
    with pytest.raises(ValueError, match="check="):
        engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, check=bad))
