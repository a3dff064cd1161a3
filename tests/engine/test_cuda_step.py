"""The static-shape denoiser (cuda_step.py) against the reference loop `denoise`, token for token.

On CPU it runs eagerly (graphs=False): same buffers, key mask, bucketing and step logic as on CUDA,
only without capture. The CUDA tests at the bottom run where a GPU is present (benchmarks/gpu.sh).
"""
import time

import pytest
import torch

from spanfill.engine import CompletionRequest, Engine
from spanfill.engine.core.checkpoint import load_model
from spanfill.engine.decoding.context_cache import ContextCache
from spanfill.engine.decoding.cuda_step import StaticSpanDenoiser, context_bucket
from spanfill.engine.decoding.denoise import DenoiseConfig, denoise
from spanfill.engine.testing import SAMPLE_PREFIX, SAMPLE_SUFFIX

CUDA = torch.cuda.is_available()


def test_context_bucket_rounds_up_to_128_within_the_model():
    assert [context_bucket(c, 1024) for c in (1, 128, 129, 300, 1000)] == [128, 128, 256, 384, 1024]


def banned_lists(tok, vocab_size):
    sp = tok.special
    engine_banned = [sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle]
    keep = {sp.eom, sp.pad, 40, 41}   # only four tokens allowed: <|eom|> comes early and often
    return {"engine": engine_banned, "eom_heavy": [t for t in range(vocab_size) if t not in keep]}


def contexts(vocab_size, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(10, vocab_size, (n,), generator=g).tolist() for n in lengths]


def run_both(model, tok, static, ids, n, cfg, **kw):
    sp = tok.special
    lookup = ContextCache(model).prepare(ids, room_after=cfg.span_length)
    ref = denoise(model, lookup.entry.kv, len(ids), n, cfg, sp.mask, sp.eom, sp.pad, **kw)
    out = static.denoise(lookup.entry.kv, len(ids), n, cfg, **kw)
    return ref, out


def assert_same(ref, out):
    assert out.span.tolist() == ref.span.tolist()
    assert (out.steps_run, out.deadline_hit, out.cancelled) == (ref.steps_run, ref.deadline_hit, ref.cancelled)


@pytest.mark.parametrize("L,T,rule,n", [(16, 4, "fixed", 1), (13, 3, "fixed", 2), (16, 8, "threshold", 1),
                                        (32, 1, "fixed", 1), (16, 4, "content", 1), (13, 3, "content", 2)])
@pytest.mark.parametrize("ban", ["engine", "eom_heavy"])
@pytest.mark.parametrize("apart", [False, True])
def test_static_steps_match_denoise(model_and_tok, L, T, rule, n, ban, apart):
    """apart: no token twice in a row (neighbours.py); with the eom-heavy list's two text tokens it acts often."""
    model, tok = model_and_tok
    static = StaticSpanDenoiser(model, tok.special.mask, tok.special.eom, tok.special.pad, graphs=False)
    repeatable = torch.zeros(model.cfg.vocab_size, dtype=torch.bool)
    repeatable[:7] = True                      # the control tokens
    cfg = DenoiseConfig(L, T, rule, threshold=0.3, banned=banned_lists(tok, model.cfg.vocab_size)[ban],
                        repeatable=repeatable if apart else None)
    # one denoiser, one bucket reused with shorter contexts (stale keys past C must stay masked), then others
    with torch.inference_mode():
        for ids in contexts(model.cfg.vocab_size, [200, 150, 129, 128, 37]):
            assert_same(*run_both(model, tok, static, ids, n, cfg))


def test_eom_heavy_spans_finish_early_and_pad(model_and_tok):
    """Guards the test above: the eom-heavy ban list really exercises truncation and the early stop."""
    model, tok = model_and_tok
    static = StaticSpanDenoiser(model, tok.special.mask, tok.special.eom, tok.special.pad, graphs=False)
    cfg = DenoiseConfig(16, 8, banned=banned_lists(tok, model.cfg.vocab_size)["eom_heavy"])
    with torch.inference_mode():
        results = [run_both(model, tok, static, ids, 1, cfg) for ids in contexts(model.cfg.vocab_size, [60] * 6, 1)]
    assert any(ref.steps_run < 8 for ref, _ in results)
    assert any(tok.special.pad in out.span.tolist()[0] for _, out in results)
    for ref, out in results:
        assert_same(ref, out)


def test_deadline_and_cancel_match_denoise(model_and_tok):
    model, tok = model_and_tok
    static = StaticSpanDenoiser(model, tok.special.mask, tok.special.eom, tok.special.pad, graphs=False)
    cfg = DenoiseConfig(16, 4, banned=banned_lists(tok, model.cfg.vocab_size)["engine"])
    ids = contexts(model.cfg.vocab_size, [90])[0]
    with torch.inference_mode():
        ref, out = run_both(model, tok, static, ids, 1, cfg, deadline=time.perf_counter() - 1)
        assert out.deadline_hit and out.steps_run == 1 and tok.special.mask not in out.span.tolist()[0]
        assert_same(ref, out)
        ref, out = run_both(model, tok, static, ids, 1, cfg, cancelled=lambda: True)
        assert out.cancelled and out.steps_run == 0
        assert_same(ref, out)


def count_calls(obj, name: str) -> list:
    """Wrap obj.name so that it appends `name` to the returned list at each call, then runs as before."""
    calls, method = [], getattr(obj, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return method(*args, **kwargs)
    setattr(obj, name, counted)
    return calls


def test_engine_on_cpu_keeps_the_reference_loop_and_the_static_one_agrees(engine):
    assert engine.static_denoiser is None
    req = CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, span_length=16, steps=4, n=2)
    sampled_req = CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, temperature=0.7, seed=3)
    ref, ref_sampled = engine.complete(req), engine.complete(sampled_req)
    sp = engine.tokenizer.special
    engine.static_denoiser = StaticSpanDenoiser(engine.model, sp.mask, sp.eom, sp.pad, graphs=False)
    static_calls = count_calls(engine.static_denoiser, "denoise")
    out = engine.complete(req)
    assert len(static_calls) == 1                       # a greedy request takes the static steps
    assert (out.texts, out.finished, out.steps_run) == (ref.texts, ref.finished, ref.steps_run)
    sampled = engine.complete(sampled_req)
    assert len(static_calls) == 1                       # sampling is not supported there: the reference loop
    assert (sampled.texts, sampled.steps_run) == (ref_sampled.texts, ref_sampled.steps_run)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_graphs_replay_the_eager_static_step_exactly(tiny_dir, dtype):
    model, tok = load_model(tiny_dir, device="cuda", dtype=dtype)
    sp = tok.special
    graphed = StaticSpanDenoiser(model, sp.mask, sp.eom, sp.pad)
    eager = StaticSpanDenoiser(model, sp.mask, sp.eom, sp.pad, graphs=False)
    assert graphed.graphs
    bans = banned_lists(tok, model.cfg.vocab_size)
    with torch.inference_mode():
        repeatable = torch.zeros(model.cfg.vocab_size, dtype=torch.bool, device="cuda")
        repeatable[:7] = True                      # the control tokens
        for ban, apart in [(b, a) for b in bans.values() for a in (None, repeatable)]:
            for rule, L, T in [("fixed", 16, 4), ("fixed", 32, 8), ("threshold", 16, 4), ("content", 32, 4)]:
                cfg = DenoiseConfig(L, T, rule, threshold=0.3, banned=ban, repeatable=apart)
                for ids in contexts(model.cfg.vocab_size, [200, 150, 37]):   # replays, then another bucket
                    lookup = ContextCache(model).prepare(ids, room_after=L)
                    a = graphed.denoise(lookup.entry.kv, len(ids), 2, cfg)
                    b = eager.denoise(lookup.entry.kv, len(ids), 2, cfg)
                    assert_same(b, a)
                    if dtype == torch.float32:   # in fp32 the padded attention agrees with the reference loop
                        ref = denoise(model, lookup.entry.kv, len(ids), 2, cfg, sp.mask, sp.eom, sp.pad)
                        assert_same(ref, a)


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_cuda_engine_captures_its_steps_once_and_then_replays_them(tiny_dir):
    engine = Engine.load(tiny_dir, device="cuda", dtype="bf16", warmup=False)   # no shape captured yet
    static = engine.static_denoiser
    assert static is not None and static.graphs
    static_calls, captures = count_calls(static, "denoise"), count_calls(static, "_capture")
    req = CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, span_length=16, steps=4)
    first = engine.complete(req)
    captured = len(captures)
    assert len(static_calls) == 1 and captured >= 1     # a new shape: its steps captured as graphs
    second = engine.complete(req)
    assert len(static_calls) == 2 and len(captures) == captured      # the same shape: replayed, none captured
    assert first.texts == second.texts
