"""The `head` length strategy: the length head's count places <|eom|> before the first step."""
import dataclasses

import pytest
import torch

from spanfill.engine import CompletionRequest, Engine
from spanfill.engine.core.checkpoint import load_model
from spanfill.engine.core.model import SpanfillModel
from spanfill.engine.decoding.denoise import DenoiseConfig, denoise
from spanfill.engine.decoding.length import HEAD_QUANTILE, head_end, place_end, resolve_length


def test_head_end_is_the_counts_quantile():
    assert head_end(torch.tensor([0.2, 0.3, 0.5])) == 1                   # cdf 0.2, 0.5: past HEAD_QUANTILE (0.45) at 1
    assert head_end(torch.tensor([0.4, 0.1, 0.5])) == 1                   # cdf 0.4: below it
    assert head_end(torch.tensor([0.3, 0.25, 0.45]), quantile=0.6) == 2   # cdf 0.3, 0.55: past 0.6 at 2
    assert head_end(torch.tensor([0.3, 0.25, 0.45]), quantile=0.5) == 1   # the median
    assert head_end(torch.tensor([0.1, 0.2, 0.15, 0.3, 0.25]), quantile=0.6) == 3   # cdf 0.1, 0.3, 0.45, 0.75
    assert head_end(torch.tensor([0.6, 0.2, 0.2])) == 0
    assert head_end(torch.tensor([0.0, 0.1, 0.9])) == 2                  # "that many or more": the last class


def test_place_end_commits_the_end_and_the_pads_after_it():
    span = torch.full((2, 6), 1)
    masked = torch.ones(2, 6, dtype=torch.bool)
    place_end(span, masked, 3, eom=2, pad=0)
    assert span.tolist() == [[1, 1, 1, 2, 0, 0]] * 2
    assert masked.tolist() == [[True, True, True, False, False, False]] * 2
    span, masked = torch.full((1, 4), 1), torch.ones(1, 4, dtype=torch.bool)
    place_end(span, masked, 4, eom=2, pad=0)                                # past the span: nothing placed
    assert span.tolist() == [[1, 1, 1, 1]] and masked.all()


def _engine_with_head(tiny_dir, count: int) -> Engine:
    base, tok = load_model(tiny_dir, dtype=torch.float32)
    model = SpanfillModel(dataclasses.replace(base.cfg, length_classes=base.cfg.span_length + 1))
    model.load_state_dict(base.state_dict(), strict=False)
    with torch.no_grad():            # a head sure of `count`, whatever the context
        model.length_head.weight.zero_()
        model.length_head.bias.fill_(-30.0)
        model.length_head.bias[count] = 30.0
    return Engine(model.eval(), tok, name="tiny-with-head")


@pytest.mark.parametrize("end", [0, 3, 9])
def test_a_placed_end_leaves_every_step_to_the_content_before_it(tiny_dir, end):
    model, tok = load_model(tiny_dir, dtype=torch.float32)
    sp = tok.special
    ids = torch.tensor([tok.encode("def add(a, b):\n    return a") + [sp.middle]])
    kv = model.allocate_kv(ids.shape[1] + 16)
    with torch.inference_mode():
        model.encode_context(ids, 0, kv)
        cfg = DenoiseConfig(16, 4, banned=[sp.mask, sp.eom, sp.pad], temperature=0.8, end=end, shrink_to=(8,))
        out = denoise(model, kv, ids.shape[1], 2, cfg, sp.mask, sp.eom, sp.pad, torch.Generator().manual_seed(0))
    span = out.span.tolist()
    assert all(row[:end] and row[end] == sp.eom or not row[:end] and row[0] == sp.eom for row in span)
    assert all(t not in (sp.mask, sp.eom, sp.pad) for row in span for t in row[:end])
    assert out.steps_run == min(4, end)          # the content rule: at least one position a step


def test_head_strategy_ends_where_the_head_says(tiny_dir):
    engine = _engine_with_head(tiny_dir, 0)           # an empty middle: no step runs
    result = engine.complete(CompletionRequest(prefix="x = ", suffix="\n", length="head", n=2, temperature=0.5, check=None))
    assert result.texts == ["", ""] and result.finished == [True, True] and result.steps_run == 0
    engine = _engine_with_head(tiny_dir, 5)
    result = engine.complete(CompletionRequest(prefix="x = ", suffix="\n", length="head", heal=False, check=None))
    assert result.finished == [True] and 1 <= result.steps_run <= engine.model.cfg.steps


def test_the_engines_head_quantile_decides_where_the_span_ends(tiny_dir):
    """A head split between 2 tokens (0.35) and 9 (0.65): quantile 0.3 ends the span at 2, 0.4 at 9;
    under the content rule each step commits at least one position, so 2 tokens take 2 of 4 steps."""
    engine = _engine_with_head(tiny_dir, 2)
    with torch.no_grad():        # every other count at -30 already
        engine.model.length_head.bias[2] = float(torch.tensor(0.35).log())
        engine.model.length_head.bias[9] = float(torch.tensor(0.65).log())
    assert engine.head_quantile == HEAD_QUANTILE
    runs = {}
    for q in (0.3, 0.4):
        engine.head_quantile = q
        runs[q] = engine.complete(CompletionRequest(prefix="x = ", suffix="\n", length="head", steps=4, heal=False,
                                                    check=None))
    assert runs[0.3].steps_run == 2 and runs[0.4].steps_run == 4
    assert all(r.finished == [True] for r in runs.values())


def test_head_strategy_fills_the_span_when_the_head_says_it_runs_past_it(tiny_dir):
    L = 16
    engine = _engine_with_head(tiny_dir, L)            # class L: L tokens or more
    result = engine.complete(CompletionRequest(prefix="x = [", suffix="]\n", length="head", span_length=L, heal=False, check=None))
    assert result.finished == [False]


def test_auto_takes_the_head_at_a_multi_line_cursor_of_a_model_with_one():
    multi = ("def f(x):\n", "\n    return y\n")         # an empty line after a block opener
    indented = ("def f(x):\n    ", "\n")                 # an empty (indented) line
    single = ("x = ", "\n")                               # the end of a line that opens no block
    inside = ("print(", ")\n")                            # text after the cursor on its line
    assert [resolve_length("auto", *c, has_head=True) for c in (multi, indented, single, inside)] == \
        ["head", "head", "pad", "pad"]
    assert {resolve_length("auto", *c, has_head=False) for c in (multi, indented, single, inside)} == {"pad"}
    assert resolve_length("late-end", *multi, has_head=True) == "late-end"      # an explicit strategy stays


def test_the_default_length_is_the_heads_at_a_multi_line_cursor_and_pads_elsewhere(tiny_dir):
    """A request with the default strategy (`auto`) decodes exactly as `head` at a multi-line cursor
    and as `pad` at a single-line one."""
    engine = _engine_with_head(tiny_dir, 3)
    for prefix, suffix in (("def f(x):\n    ", "\n"), ("x = ", "\n")):
        strategy = resolve_length("auto", prefix, suffix, has_head=True)
        assert strategy == ("head" if prefix.endswith("    ") else "pad")
        runs = [engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, heal=False, **kw))
                for kw in ({}, {"length": strategy})]
        assert runs[0].texts == runs[1].texts and runs[0].steps_run == runs[1].steps_run
        if strategy == "head":       # three tokens, then the end the head placed
            assert len(engine.tokenizer.encode(runs[0].texts[0])) <= 3 and runs[0].finished == [True]


def test_head_strategy_needs_a_model_with_a_length_head(engine):
    with pytest.raises(ValueError, match="length='head' needs a model with a length head"):
        engine.complete(CompletionRequest(prefix="x = ", suffix="\n", length="head"))


def test_a_span_finished_before_its_last_step_is_not_reported_cancelled(tiny_dir):
    """The plan is not polled again once every position is committed: a cancel that arrives after the
    span is done does not throw the finished span away."""
    model, tok = load_model(tiny_dir, dtype=torch.float32)
    sp = tok.special
    ids = torch.tensor([tok.encode("x = ") + [sp.middle]])
    kv = model.allocate_kv(ids.shape[1] + 16)
    polls = []

    def cancelled():
        polls.append(1)
        return len(polls) > 2          # true from the third poll: after two steps

    with torch.inference_mode():
        model.encode_context(ids, 0, kv)
        cfg = DenoiseConfig(16, 4, banned=[sp.mask, sp.eom, sp.pad], end=2)
        out = denoise(model, kv, ids.shape[1], 1, cfg, sp.mask, sp.eom, sp.pad, cancelled=cancelled)
    assert out.steps_run == 2 and not out.cancelled and len(polls) == 2


def test_the_static_span_denoiser_places_the_heads_end_too(tiny_dir):
    """The CUDA path's static buffers (run here without graphs) start from the placed end as the
    eager loop does. It keeps the whole span where the eager loop shrinks it, so the content may
    differ (as under `pad`); without shrinking both decode the same tokens."""
    from spanfill.engine.decoding.cuda_step import StaticSpanDenoiser
    model, tok = load_model(tiny_dir, dtype=torch.float32)
    sp = tok.special
    ids = torch.tensor([tok.encode("def f(x):\n    return ") + [sp.middle]])
    kv = model.allocate_kv(ids.shape[1] + 16)
    cfg = DenoiseConfig(16, 4, banned=[sp.mask, sp.eom, sp.pad], end=5)
    with torch.inference_mode():
        model.encode_context(ids, 0, kv)
        static = StaticSpanDenoiser(model, sp.mask, sp.eom, sp.pad, graphs=False).denoise(kv, ids.shape[1], 1, cfg)
        eager = denoise(model, kv, ids.shape[1], 1, cfg, sp.mask, sp.eom, sp.pad)
    row = static.span[0].tolist()
    assert row[5] == sp.eom and row[6:] == [sp.pad] * 10 and sp.mask not in row
    assert static.span.tolist() == eager.span.tolist()
