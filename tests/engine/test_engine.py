"""Engine behaviour on a tiny random-weight model: caching, schedule, <|eom|>, sampling, deadline, AR."""
import pytest
import torch

from spanfill.engine import CancelledError, CompletionRequest, Engine, Snippet
from spanfill.engine.testing import SAMPLE_PREFIX as PREFIX, SAMPLE_SUFFIX as SUFFIX, build_tiny_model


def suppress(engine, *token_ids):
    """Make the model never propose the given tokens (e.g. <|eom|>), so spans cannot end early."""
    original = engine.model.logits

    def logits(h):
        out = original(h)
        out[..., list(token_ids)] = float("-inf")
        return out
    engine.model.logits = logits


def count_span_steps(engine):
    calls = []
    original = engine.model.span_step
    engine.model.span_step = lambda *a, **k: calls.append(1) or original(*a, **k)
    return calls


def test_typing_one_character_reencodes_only_the_tail(engine):
    first = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    assert first.reused_tokens == 0 and first.encoded_tokens == first.context_tokens
    second = engine.complete(CompletionRequest(prefix=PREFIX + " ", suffix=SUFFIX))
    assert second.reused_tokens >= second.context_tokens - 3
    assert second.encoded_tokens == second.context_tokens - second.reused_tokens
    assert second.encoded_tokens <= 3
    same = engine.complete(CompletionRequest(prefix=PREFIX + " ", suffix=SUFFIX))
    assert same.encoded_tokens == 0


@pytest.mark.parametrize("steps", [1, 2, 4, 8])
def test_fixed_schedule_runs_exactly_T_forward_passes(engine, steps):
    sp = engine.tokenizer.special
    suppress(engine, sp.eom, sp.pad)
    calls = count_span_steps(engine)
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, span_length=16, steps=steps))
    assert len(calls) == steps == result.steps_run


def test_threshold_rule_commits_at_least_one_per_step_and_stops_at_T(engine):
    sp = engine.tokenizer.special
    suppress(engine, sp.eom, sp.pad)
    calls = count_span_steps(engine)
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, span_length=16, steps=16,
                                               rule="threshold", threshold=1.01))  # nothing clears tau
    assert len(calls) == 16 == result.steps_run   # exactly one commit per step
    calls.clear()
    engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, span_length=16, steps=16,
                                      rule="threshold", threshold=-3.0))   # everything clears it (a pair that would
    # repeat a token waits below the others: confidence - 2, neighbours.py)
    assert len(calls) == 1


def test_eom_ends_the_completion(engine):
    tok = engine.tokenizer
    engine.model.logits = lambda h: torch.nn.functional.one_hot(
        torch.full(h.shape[:-1], tok.special.eom), engine.model.cfg.vocab_size).float()
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, span_length=16, steps=4))
    assert result.texts == [""] and result.finished == [True]


def test_seeded_sampling_is_reproducible_and_seed_dependent(engine):
    req = dict(prefix=PREFIX, suffix=SUFFIX, temperature=1.0, top_p=0.95, n=4)
    a = engine.complete(CompletionRequest(**req, seed=7)).texts
    b = engine.complete(CompletionRequest(**req, seed=7)).texts
    c = engine.complete(CompletionRequest(**req, seed=8)).texts
    assert a == b
    assert a != c


def test_n_candidates_in_one_batch(engine):
    calls = count_span_steps(engine)
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, n=3, temperature=1.0, seed=1, steps=2))
    assert len(result.texts) == 3 == len(result.finished)
    assert len(calls) == result.steps_run <= 2   # candidates share each forward pass
    assert len(set(result.texts)) > 1


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_greedy_first_candidate_is_the_greedy_completion(engine, mode):
    greedy = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, mode=mode, span_length=16)).texts[0]
    for seed in (1, 2):
        texts = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, mode=mode, span_length=16, n=4,
                                                  temperature=1.5, seed=seed, greedy_first=True)).texts
        assert texts[0] == greedy
        assert any(t != greedy for t in texts[1:])   # the others are still samples


def test_deadline_commits_everything_left_in_one_final_step(engine):
    sp = engine.tokenizer.special
    suppress(engine, sp.eom, sp.pad)
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, span_length=16, steps=8, deadline_ms=0))
    assert result.deadline_hit and result.steps_run == 1 and result.finished == [False]


def test_a_deadline_that_ran_out_in_the_last_step_leaves_no_ar_check_or_fallback(engine):
    """A deadline that passes during the final (or only) step cuts no step, but the AR fallback after it
    wrote one token and stopped at the deadline, and that token replaced what diffusion wrote; the AR
    check likewise ran past it. Both are skipped: diffusion's text stands, and the deadline counts as hit."""
    plain = engine.complete(CompletionRequest(prefix="def f(x):\n    ", suffix="\n", steps=1, check=None))
    late = engine.complete(CompletionRequest(prefix="def f(x):\n    ", suffix="\n", steps=1, check=None, deadline_ms=0,
                                             would_show=lambda text: False))
    assert not late.fell_back and late.deadline_hit and late.texts == plain.texts
    checked = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, steps=1, check=0.03, deadline_ms=0))
    assert checked.deadline_hit and checked.check_passes == 0
    assert checked.texts == engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, steps=1, check=None)).texts


def test_a_cursor_in_text_with_cr_line_ends_is_the_kind_of_cursor_its_lf_twin_is(tmp_path, monkeypatch):
    """Lines ended by a lone \r (an API caller's text; LSP counts \r as a line end) decide the span, the
    length rule and AR's stop as \n does: `def f():\r    |` is a multi-line cursor (the raw text read it
    as the end of one long line: a single-line cursor's shorter span)."""
    engine = Engine.load(build_tiny_model(tmp_path / "m", span_length=32, length_classes=33), device="cpu",
                         dtype="fp32", warmup=False)
    seen = []
    real = engine._diffusion

    def spy(entry, C, L, T, length, *args):
        seen.append((L, length))
        return real(entry, C, L, T, length, *args)
    monkeypatch.setattr(engine, "_diffusion", spy)
    for prefix, suffix in (("def f():\n    ", "\n    return 1\n"), ("def f():\r    ", "\r    return 1\r"),
                           ("x = foo(", ")\n"), ("x = foo(", ")\r")):
        engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, check=None))
    assert seen[0] == seen[1] == (32, "head") and seen[2] == seen[3] == (16, "pad")


def test_cancelled_request(engine):
    with pytest.raises(CancelledError):
        engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, cancelled=lambda: True))
    suppress(engine, engine.tokenizer.special.eom, engine.tokenizer.special.pad)
    polls = []
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, steps=4,
                                               cancelled=lambda: polls.append(1) or len(polls) > 2))
    assert result.cancelled and result.texts == [""] and result.steps_run == 1   # polls: at entry, before step 1, before step 2


def test_ar_mode_matches_a_reference_loop(engine, monkeypatch):
    """AR decoding through the KV cache == recomputing the whole causal sequence for every token
    (PREFIX/SUFFIX is a single-line cursor: both end after a token that ends a line)."""
    from spanfill.engine.decoding.prompt import context_ids
    tok, model = engine.tokenizer, engine.model
    ids = context_ids(tok, PREFIX, SUFFIX, budget=engine.budget)
    L = 12
    sp = tok.special
    banned = [sp.pad, sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle]
    reference = []
    with torch.inference_mode():
        for _ in range(L):
            seq = torch.tensor([ids + reference])
            S = seq.shape[1]
            mask = torch.ones(S, S, dtype=torch.bool).tril()[None, None]
            logits = model.forward_train(seq, torch.arange(S)[None], mask)[0, -1]
            logits[banned] = float("-inf")   # control tokens never appear inside a middle
            nxt = int(logits.argmax())
            reference.append(nxt)
            if nxt == tok.special.eom or nxt in engine.line_ends:   # a single-line cursor: one line
                break
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, mode="ar", span_length=L, heal=False))
    end = reference.index(tok.special.eom) if tok.special.eom in reference else len(reference)
    expected = tok.decode(t for t in reference[:end] if t not in (tok.special.pad, tok.special.mask))
    assert result.texts == [expected]
    assert result.steps_run <= len(reference)       # prompt lookup may write several tokens a pass
    monkeypatch.setattr(engine, "lookup_tokens", 0)
    alone = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, mode="ar", span_length=L, heal=False))
    assert alone.texts == [expected] and alone.steps_run == len(reference)


def test_ar_ends_a_single_line_cursor_with_the_first_token_that_ends_a_line(engine, monkeypatch):
    monkeypatch.setattr(engine, "lookup_tokens", 0)      # one pass a token: steps_run counts the tokens
    newline = engine.tokenizer.encode("\n")[0]
    assert newline in engine.line_ends and engine.tokenizer.encode("x")[0] not in engine.line_ends
    original = engine.model.logits

    def says_newline(h):              # every position proposes the line end; <|eom|> never
        out = original(h)
        out[..., engine.tokenizer.special.eom] = float("-inf")
        out[..., newline] = 1e4
        return out
    engine.model.logits = says_newline
    single = engine.complete(CompletionRequest(prefix="total = compute(", suffix=")\nprint(total)\n", mode="ar",
                                               span_length=8, heal=False))
    assert single.steps_run == 1 and single.texts == ["\n"]
    block = engine.complete(CompletionRequest(prefix="def f():\n    ", suffix="\n", mode="ar", span_length=8, heal=False))
    assert block.steps_run == 8 and block.texts == ["\n" * 8]     # a multi-line cursor: the span's tokens


def test_ar_ends_a_multi_line_cursor_with_the_first_token_of_a_line_that_leaves_the_block(engine, monkeypatch):
    """At `def f():\\n    |` a script that writes two body lines then a line at column 0: decoding ends
    with that line's first token, not at the span's end."""
    monkeypatch.setattr(engine, "lookup_tokens", 0)      # the script counts calls: one pass a token
    tok, sp = engine.tokenizer, engine.tokenizer.special
    script = tok.encode("x = 1\n    y = 2\nz = 3\n    w = 4\n")
    dedent = next(i for i in range(len(script)) if tok.decode(script[:i + 1]).endswith("\nz"))
    original = engine.model.logits
    said = []

    def scripted(h):                   # the i-th call proposes the script's i-th token
        out = original(h)
        out[..., sp.eom] = float("-inf")
        out[..., script[min(len(said), len(script) - 1)]] = 1e4
        said.append(1)
        return out
    engine.model.logits = scripted
    block = engine.complete(CompletionRequest(prefix="def f():\n    ", suffix="\n", mode="ar", span_length=24, heal=False))
    assert block.steps_run == dedent + 1
    assert block.texts == [tok.decode(script[:dedent + 1])]
    said.clear()
    inside = engine.complete(CompletionRequest(prefix="def f():\n    ", suffix="\n", mode="ar", span_length=dedent,
                                               heal=False))
    assert inside.steps_run == dedent       # the body alone: no stop before the span's end


@pytest.mark.parametrize("bad", [dict(span_length=0), dict(steps=0), dict(n=0), dict(mode="beam"),
                                 dict(rule="greedy"), dict(length="eos"), dict(top_p=0.0), dict(temperature=-1.0),
                                 dict(temperature=float("nan")), dict(top_p=float("nan")), dict(threshold=float("inf")),
                                 dict(steps=10**9), dict(n=2.0), dict(span_length=2.5), dict(seed="x"),
                                 dict(seed=2**70), dict(deadline_ms="soon"), dict(temperature=1e-39),
                                 dict(temperature=1e300), dict(cut="false"), dict(heal="no"), dict(greedy_first=1),
                                 dict(shrink_span=None), dict(fast_steps="no"), dict(cancelled=False),
                                 dict(would_show=True), dict(snippet_tokens=-1), dict(snippet_tokens=8.0)])
def test_invalid_requests_get_clear_errors(engine, bad):
    with pytest.raises(ValueError, match="="):
        engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, **bad))


@pytest.mark.parametrize("bad", [dict(prefix=None), dict(suffix=3), dict(snippets=["def f(): pass"]),
                                 dict(cut=False, prefix_ids=[10**6]), dict(cut=False, suffix_ids=[-5]),
                                 dict(cut=False, prefix_ids=[1.5]), dict(snippets=[Snippet(None, "x")]),
                                 dict(snippets=[Snippet("a.py", 5)])])
def test_wrong_typed_text_and_ids_out_of_the_vocabulary_are_refused_before_any_work(engine, bad):
    cached = engine.cache_stats
    with pytest.raises(ValueError):
        engine.complete(CompletionRequest(**{"prefix": "x = ", "suffix": "\n", **bad}))
    assert engine.cache_stats == cached         # refused before the context cache saw it


def test_snippet_tokens_bound_the_snippets_below_the_models_budget(engine):
    snippets = [Snippet("other.py", "".join(f"value_{i} = compute({i})\n" for i in range(200)))]
    def context(**extra) -> int:
        return engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, snippets=snippets, n=1,
                                                 **extra)).context_tokens
    alone = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX)).context_tokens
    own = engine.budget.snippet_tokens
    assert alone < context() <= alone + own
    half = own // 2
    assert alone < context(snippet_tokens=half) <= alone + half < context()
    assert context(snippet_tokens=0) == alone
    assert context(snippet_tokens=10 * own) == context()      # never more than the model's own budget


def test_every_length_strategy_completes_one_and_several_candidates(engine):
    from spanfill.engine import LENGTHS
    for length in (name for name in LENGTHS if name != "head"):     # head: tests/engine/test_length_head.py
        for n in (1, 3):
            result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, length=length, n=n))
            assert len(result.texts) == n and 1 <= result.steps_run <= engine.model.cfg.steps
    # the first-step strategies end every candidate: the <|eom|> is placed on the first step
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, length="first-step", n=3, check=None))
    assert result.finished == [True] * 3


def test_huge_document_is_windowed(engine):
    result = engine.complete(CompletionRequest(prefix="x = 1\n" * 200_000 + "y = ", suffix="\n" + "z = 2\n" * 100_000))
    assert result.context_tokens <= engine.model.cfg.max_context_tokens + 8


def test_ar_s_block_stop_reads_the_windows_not_the_whole_document(engine, monkeypatch):
    """At a multi-line cursor AR asks after every token whether the text has left the cursor's block;
    that read the caller's whole prefix and suffix each time (a few megabytes: milliseconds a token)."""
    from spanfill.engine import engine as engine_module
    read = []
    real = engine_module.leaves_block

    def leaves_block(text, cur):
        read.append(len(cur.before) + len(cur.after))
        return real(text, cur)
    monkeypatch.setattr(engine_module, "leaves_block", leaves_block)
    prefix = "x = 1\n" * 100_000 + "def f():\n    "
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="\n" + "z = 2\n" * 50_000, mode="ar",
                                               span_length=8, heal=False))
    assert read and max(read) < 20_000, max(read)          # the windows the model read, not the 900 kB
    assert result.texts[0] == engine.complete(CompletionRequest(
        prefix=prefix[-2000:], suffix="\n" + "z = 2\n" * 300, mode="ar", span_length=8, heal=False)).texts[0]


def test_threads_are_set_for_the_engine_and_kept_when_a_load_fails(tiny_dir, tmp_path):
    from spanfill.engine import Engine
    from spanfill.engine.core.checkpoint import CheckpointError
    before = torch.get_num_threads()
    wanted = before + 1                            # not what torch has already: the engine must set it
    try:
        engine = Engine.load(tiny_dir, device="cpu", dtype="fp32", warmup=False, compile=False, threads=wanted)
        assert torch.get_num_threads() == wanted and engine.info["threads"] == wanted
        with pytest.raises(CheckpointError):
            Engine.load(tmp_path / "missing", device="cpu", compile=False, threads=wanted + 1)
        assert torch.get_num_threads() == wanted   # the engine that loaded keeps its threads
        with pytest.raises(ValueError, match="at least 1"):
            Engine.load(tiny_dir, device="cpu", compile=False, threads=0)
    finally:
        torch.set_num_threads(before)


def test_a_diffusion_result_the_caller_would_not_show_is_decoded_again_by_ar(engine):
    ar = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, mode="ar"))
    plain = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    seen = []

    def never(text):
        seen.append(text)
        return False
    fallen = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, would_show=never))
    assert seen == plain.texts                          # asked about diffusion's candidate, not AR's
    assert fallen.fell_back and fallen.texts == ar.texts and not plain.fell_back
    assert fallen.steps_run == plain.steps_run + ar.steps_run and fallen.timings.fallback_ms > 0
    kept = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, would_show=lambda text: True))
    assert not kept.fell_back and kept.texts == plain.texts
    sampled = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, n=3, temperature=0.8, seed=1,
                                                would_show=never))
    assert sampled.fell_back and sampled.texts == ar.texts      # one greedy AR candidate in place of all


def test_a_fallback_that_runs_out_of_time_leaves_diffusions_text_unless_its_own_would_show(engine, monkeypatch):
    """AR's text cut short by the deadline replaces diffusion's only where the caller would show it:
    otherwise diffusion's, which the caller may still show in part (Shown.would_show asks for more
    than that at a multi-line cursor), stands."""
    plain = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX))
    original = engine._ar

    def out_of_time(*args, **kwargs):
        rows, steps, _deadline_hit, cancelled = original(*args, **kwargs)
        return [row[:1] for row in rows], steps, True, cancelled
    monkeypatch.setattr(engine, "_ar", out_of_time)
    late = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, would_show=lambda text: False))
    assert late.texts == plain.texts and not late.fell_back and late.deadline_hit
    assert late.timings.fallback_ms > 0
    shown_if_not_diffusions = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX,
                                                                would_show=lambda text: text not in plain.texts))
    assert shown_if_not_diffusions.fell_back and shown_if_not_diffusions.deadline_hit
    assert shown_if_not_diffusions.texts != plain.texts and len(shown_if_not_diffusions.texts) == 1


def test_a_diffusion_result_with_no_text_falls_back_at_a_multi_line_cursor_only(engine):
    sp = engine.tokenizer.special
    original = engine.model.logits

    def ends_at_once(h):      # <|eom|> first: the model sees nothing to insert
        out = original(h)
        out[..., sp.eom] = 1e4
        return out
    engine.model.logits = ends_at_once
    single_line = dict(prefix="x = compute(", suffix=")\n", heal=False, would_show=lambda text: False)
    result = engine.complete(CompletionRequest(**single_line))
    assert result.texts == [""] and not result.fell_back
    multi_line = dict(prefix="def f(x):\n", suffix="\n", heal=False, would_show=lambda text: False)
    assert engine.complete(CompletionRequest(**multi_line)).fell_back      # a body is wanted there


def test_a_cancelled_request_does_not_fall_back(engine):
    polls = []

    def cancelled():      # not before the request starts; from its first step on
        polls.append(1)
        return len(polls) > 1
    result = engine.complete(CompletionRequest(prefix=PREFIX, suffix=SUFFIX, would_show=lambda text: False,
                                               cancelled=cancelled))
    assert result.cancelled and not result.fell_back and result.texts == [""]


def test_a_context_that_leaves_room_for_a_short_span_only_is_refused_not_run_past_the_positions(tmp_path):
    """At a single-line cursor the span starts on 16 positions, but the AR check and fallback decode up
    to the model's whole span: a context with room for 16 but not 32 ran past the position table."""
    from spanfill.engine import Engine
    from spanfill.engine.decoding.prompt import context_ids
    from spanfill.engine.testing import build_tiny_model
    engine = Engine.load(build_tiny_model(tmp_path / "m", span_length=32, max_positions=256), device="cpu",
                         dtype="fp32", warmup=False, compile=False)
    suffix = " + 1\n"
    for lines in range(1, 200):
        prefix = "".join(f"v{i} = {i}\n" for i in range(lines)) + "y = a"
        n = len(context_ids(engine.tokenizer, prefix, suffix, [], engine.budget, cut=False))
        if 256 - 32 < n + 1 <= 256 - 16:       # + 1: healing may drop a token and add none
            break
    else:
        pytest.fail("no context of the wanted length")
    with pytest.raises(ValueError, match="exceeds the model's 256 positions"):
        engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, cut=False))
    assert engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, cut=True)).texts   # cut to fit: served


def test_a_context_budget_past_the_positions_is_cut_to_them(tmp_path):
    """A config whose max_context_tokens and span need more positions than it has: cut=True requests
    on a long file are cut to the positions the span leaves, not refused."""
    from spanfill.engine import Engine
    from spanfill.engine.testing import build_tiny_model
    engine = Engine.load(build_tiny_model(tmp_path / "m", span_length=32, max_positions=200, max_context_tokens=448),
                         device="cpu", dtype="fp32", warmup=False, compile=False)
    prefix = "".join(f"value_{i} = compute({i}, {i + 1})\n" for i in range(300)) + "y = a"
    result = engine.complete(CompletionRequest(prefix=prefix, suffix=" + 1\n" * 200, cut=True))
    assert result.texts and result.context_tokens <= 200 - 32
    longer = engine.complete(CompletionRequest(prefix=prefix, suffix=" + 1\n" * 200, cut=True, span_length=96))
    assert longer.texts and longer.context_tokens <= 200 - 96      # a span longer than the model's leaves less


@pytest.mark.parametrize("total", [0, 1, 9, 100, 224, 519, 520, 521, 1000, 4096])
def test_a_scaled_budget_fits_its_total(total):
    from spanfill.engine.decoding.prompt import Budget
    budget = Budget.scaled(total)
    assert budget.total <= max(total, Budget(0, 0, 0).total)
    assert Budget.scaled(520) == Budget()      # the trained split at the trained total


def test_a_model_with_more_logits_than_tokens_heals_and_refuses_ids_past_the_tokenizer(tmp_path):
    """A checkpoint may pad its vocabulary past the tokenizer's: healing's bias had the tokenizer's
    size and failed to add to the logits."""
    from spanfill.engine import Engine
    from spanfill.engine.core.checkpoint import save_model
    from spanfill.engine.core.model import SpanfillModel
    from spanfill.engine.core.tokenizer import train_tokenizer
    from spanfill.engine.testing import SAMPLE_CODE, tiny_config
    cfg = tiny_config()
    tok = train_tokenizer(iter([SAMPLE_CODE] * 4), cfg.vocab_size)
    cfg.vocab_size = tok.vocab_size + 64
    cfg.special_tokens = {name: getattr(tok.special, name) for name in tok.special.__dataclass_fields__}
    torch.manual_seed(0)
    save_model(tmp_path / "padded", SpanfillModel(cfg), tok)
    engine = Engine.load(tmp_path / "padded", device="cpu", dtype="fp32", warmup=False, compile=False)
    for mode in ("diffusion", "ar"):
        assert len(engine.complete(CompletionRequest(prefix="def f(a):\n    return a", suffix="\n",
                                                     mode=mode)).texts) == 1
    with pytest.raises(ValueError, match="prefix_ids holds ids outside"):
        engine.complete(CompletionRequest(prefix="x", suffix="", cut=False, prefix_ids=[tok.vocab_size + 3],
                                          suffix_ids=[]))


@pytest.mark.parametrize("device, says", [("gpu", "not one of auto, cpu"), (None, "not one of auto, cpu"),
                                          ("meta", "not one of auto, cpu"), ("cuda:7", "cuda"), ("mps", "MPS")])
def test_a_device_this_machine_lacks_is_named_before_the_model_loads(tiny_dir, device, says):
    import torch
    from spanfill.engine import Engine
    if device == "cuda:7" and torch.cuda.device_count() > 7 or device == "mps" and torch.backends.mps.is_available():
        pytest.skip(f"this machine has {device}")
    with pytest.raises(ValueError, match=says):
        Engine.load(tiny_dir, device=device, warmup=False, compile=False)


def test_threads_must_be_a_whole_number(tiny_dir):
    from spanfill.engine import Engine
    for threads in ("2", 0, 1.5, True):
        with pytest.raises(ValueError, match="threads must be an integer"):
            Engine.load(tiny_dir, device="cpu", threads=threads, warmup=False, compile=False)
