"""The compiled CPU steps (compiled.py) decode exactly like the eager engine, and are really used."""
import json
import shutil
import threading

import pytest
import torch
from torch._dynamo.eval_frame import _debug_get_cache_entry_list
from torch._inductor.codecache import PersistentCache

from spanfill.engine import CompletionRequest, Engine, shrink_lengths
from spanfill.engine.decoding.compiled import CompiledSteps, forget_autotune_timings, own_code
from spanfill.engine.testing import SAMPLE_PREFIX, SAMPLE_SUFFIX


HAS_CXX = any(shutil.which(c) for c in ("c++", "g++", "clang++"))


@pytest.mark.skipif(not HAS_CXX, reason="Inductor needs a C++ compiler; test_a_failed_compile covers the fallback")
@pytest.mark.parametrize("dtype", ["fp32", "int8"])   # int8: the custom op inside the graphs (quantize.py)
def test_compiled_steps_decode_like_eager(tiny_dir, dtype):
    eager = Engine.load(tiny_dir, device="cpu", dtype=dtype, warmup=False, compile=False)
    fast = Engine.load(tiny_dir, device="cpu", dtype=dtype, warmup=False, compile=False)
    counters = torch._dynamo.utils.counters
    frames, unsupported = dict(counters["frames"]), dict(counters["unimplemented"])
    compiled = fast.compile(wait=True)
    # every prefill case has a graph of this engine's own (the parametrized cases compile one engine
    # after the other in one process: with shared code, the second would find Dynamo's limit reached)
    assert len(graphs_of(compiled._prefill)) == 6
    # each step compiled whole: no frame Dynamo gave up on (it would run eagerly, piecemeal)
    assert counters["frames"]["total"] - frames.get("total", 0) == counters["frames"]["ok"] - frames.get("ok", 0)
    assert dict(counters["unimplemented"]) == unsupported
    assert compiled.ready and compiled.error is None and fast.info["compiled"]
    assert (fast.info["compile"], eager.info["compile"]) == ("ready", "off")
    assert fast.info["compile_seconds"] > 0 and eager.info["compile_seconds"] is None
    calls = {"span": 0, "token": 0, "prefill": 0, "every": 0}
    span_step, token_step, prefill, every = compiled.denoise_step, compiled.token_step, compiled.prefill, compiled.encode_every

    def counting(name, fn):
        def call(*args):
            calls[name] += 1
            return fn(*args)
        return call

    compiled.denoise_step, compiled.token_step = counting("span", span_step), counting("token", token_step)
    compiled.prefill, compiled.encode_every = counting("prefill", prefill), counting("every", every)
    L = fast.model.cfg.span_length
    expected = {"span": 0, "token": 0, "prefill": 0, "every": 0}
    compiles = dict(torch._dynamo.utils.counters["frames"])
    compiled.strict = True   # a call the warm-up did not compile for raises instead of running eagerly
    eager.lookup_tokens = fast.lookup_tokens = 0   # one pass a token: the counts below (lookup: after the loop)
    # contexts of several lengths (one beyond the warm-up's capacities), healed and not, and typing
    # on character by character (a prefill of the few re-encoded tokens; healing re-encodes two or more)
    for prefix in (SAMPLE_PREFIX, SAMPLE_PREFIX + "ret", SAMPLE_PREFIX + "retu", SAMPLE_PREFIX * 3, "x = self.app",
                   SAMPLE_PREFIX * 5):
        for mode, steps, check in (("diffusion", 4, None), ("diffusion", 3, None), ("diffusion", 1, None),
                                   ("diffusion", 4, 0.1), ("ar", None, None)):
            req = dict(prefix=prefix, suffix=SAMPLE_SUFFIX, mode=mode, steps=steps, check=check)
            before = dict(calls)
            a, b = eager.complete(CompletionRequest(**req)), fast.complete(CompletionRequest(**req))
            assert b.texts == a.texts and b.steps_run == a.steps_run
            expected["prefill"] += b.encoded_tokens > 0
            if check is not None:   # the span's steps; the check's pass over the draft (a prefill), AR's tokens after
                span, token = calls["span"] - before["span"], calls["token"] - before["token"]
                check_pass = calls["every"] - before["every"]
                assert span == b.steps_run and check_pass in (0, 1) and 1 + token == b.check_passes == a.check_passes
                expected["span"] += span
                expected["token"] += token
                expected["every"] += check_pass
            elif mode == "diffusion":
                expected["span"] += b.steps_run
            else:   # the first AR token comes from the context's last hidden state
                expected["token"] += b.steps_run - 1
    assert calls == expected and expected["span"] >= 4 and expected["token"] >= 4 and expected["prefill"] >= 4
    assert expected["every"] >= 4          # the check's pass over a draft ran on the prefill's graphs (strict)
    # prompt lookup's passes run on the prefill's graphs too, and write what the eager engine writes
    eager.lookup_tokens = fast.lookup_tokens = 4
    for mode, check in (("ar", None), ("diffusion", 0.1)):
        req = dict(prefix=SAMPLE_PREFIX * 3, suffix=SAMPLE_SUFFIX, mode=mode, check=check)
        before = calls["every"]
        a, b = eager.complete(CompletionRequest(**req)), fast.complete(CompletionRequest(**req))
        assert b.texts == a.texts and b.steps_run == a.steps_run and b.check_passes == a.check_passes
        if mode == "ar":                     # no check pass in AR mode: these are lookup's
            assert calls["every"] > before
        expected["every"] = calls["every"]
        expected["token"], expected["prefill"] = calls["token"], calls["prefill"]
        expected["span"] = calls["span"]
    # fast_steps=False: the eager reference loop, the compiled steps untouched
    slow = fast.complete(CompletionRequest(prefix="y = 1\n" + SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, fast_steps=False))
    assert calls == expected and slow.steps_run > 0
    # one typed token at a time (the requests above heal, re-encoding two or more)
    with torch.inference_mode():
        kv, scratch = fast.cache.allocate(300), fast.cache.allocate(300)
        ids = [40, 41, 42, 43, 44, 45]
        for start, end in ((0, 3), (3, 4), (4, 5), (5, 6)):
            new = torch.tensor([ids[start:end]])   # as the cache passes them (a slice's strides differ)
            hidden, expected_hidden = prefill(new, start, kv), fast.model.encode_context(new, start, scratch)
            assert torch.allclose(hidden, expected_hidden, atol=1e-5)
            assert torch.allclose(kv[-1][1][:, :, :end], scratch[-1][1][:, :, :end], atol=1e-5)
    assert compiled.fallbacks == {"denoise": 0, "token": 0, "prefill": 0}
    assert dict(torch._dynamo.utils.counters["frames"]) == compiles    # no request paid for a (re)compile
    # what it was not compiled for stays on the eager path
    compiled.strict = False
    before = dict(calls)
    fast.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, n=2, steps=2))
    fast.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, span_length=L + 4, steps=2))
    fast.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, temperature=0.7, steps=2))
    fast.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, rule="threshold", steps=2))
    fast.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, rule="fixed", steps=2))
    assert calls["span"] == before["span"]


def graphs_of(compiled_fn) -> list:
    """The graphs Dynamo holds for a torch.compile'd (bound) function."""
    return _debug_get_cache_entry_list(compiled_fn._torchdynamo_orig_callable.__func__.__code__)


class Doubler:
    def __init__(self, k):
        self.k = k

    def step(self, x):
        return x * self.k


def test_each_instance_compiles_into_graphs_of_its_own():
    steps = [torch.compile(own_code(Doubler(k).step)) for k in range(10)]   # more than Dynamo's limit of 8
    for k, step in enumerate(steps):
        assert torch.equal(step(torch.ones(3)), torch.full((3,), float(k)))
    assert all(len(graphs_of(step)) == 1 for step in steps)
    assert own_code(Doubler(1).step).__func__.__code__ is not Doubler.step.__code__


def test_a_failed_compile_leaves_the_engine_eager(tiny_dir, monkeypatch):
    engine = Engine.load(tiny_dir, device="cpu", dtype="fp32", warmup=False, compile=False)

    def broken(*args, **kw):
        raise RuntimeError("no C++ compiler")

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: broken)
    compiled = engine.compile(wait=True)
    assert not compiled.ready and "no C++ compiler" in compiled.error
    result = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX))
    assert len(result.texts) == 1 and not engine.info["compiled"] and engine.info["compile"] == "failed"
    assert engine.info["compile_seconds"] is None


def test_a_retired_engine_stops_compiling_before_its_next_graph(tiny_dir, monkeypatch):
    engine = Engine.load(tiny_dir, device="cpu", dtype="fp32", warmup=False, compile=False)
    entered, go, calls = threading.Event(), threading.Event(), []

    def slow_graph(*args, **kw):             # the first graph "compiles" until the test lets it go on
        calls.append(1)
        entered.set()
        go.wait(10)

    monkeypatch.setattr(torch, "compile", lambda fn, **kw: slow_graph)
    compiled = engine.compile()
    assert entered.wait(10)
    engine.retire()
    go.set()
    assert not compiled.wait(10) and compiled.error.startswith("stopped")
    assert len(calls) == 1 and engine.info["compile"] == "failed"


@pytest.fixture(scope="module")
def compiled_l32(tmp_path_factory):
    """A compiled engine whose span (32) the denoising loop can cut to SHRINK_TO's lengths: a span graph each."""
    from spanfill.engine.testing import build_tiny_model
    model_dir = build_tiny_model(tmp_path_factory.mktemp("l32") / "model", span_length=32)
    # timings an earlier process left behind, which this warm-up must not reuse
    timings = PersistentCache.get_local_cache_path()
    timings.parent.mkdir(parents=True, exist_ok=True)
    timings.write_text(json.dumps({"system": {}, "cache": {"left_by_an_earlier_process": {}}}))
    torch._dynamo.reset()     # graphs other tests compiled for these functions would be reused
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    engine = Engine.load(model_dir, device="cpu", dtype="fp32", warmup=False, compile=True, wait=True)
    engine.warm_up_graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs
    return engine


@pytest.mark.skipif(not HAS_CXX, reason="Inductor needs a C++ compiler")
def test_the_warm_up_compiles_no_graph_for_one_context_length_only(compiled_l32):
    # denoising: a dynamic-context graph for 32 and each length it is cut to, and 32 on views that
    # are whole buffers; the token step: dynamic and whole buffers; the prefill: six cases (see
    # CompiledSteps.warm). Without DYNAMIC_FROM_THE_START graphs specialised to the first call's
    # context length come first, which no request uses
    lengths = compiled_l32.compiled.span_lengths
    assert lengths == (32, *shrink_lengths(32))
    assert compiled_l32.warm_up_graphs == len(lengths) + 1 + 2 + 6


@pytest.mark.skipif(not HAS_CXX, reason="Inductor needs a C++ compiler")
def test_the_warm_up_times_its_matmuls_afresh_and_reuses_its_own_timings(compiled_l32):
    assert compiled_l32.compiled.ready
    kept = json.loads(PersistentCache.get_local_cache_path().read_text())["cache"]
    assert "left_by_an_earlier_process" not in kept
    assert kept.get("packed_linear")     # this warm-up's timings, kept for its later graphs


def test_autotune_timings_that_cannot_be_cleared_are_not_reused(monkeypatch):
    def broken():
        raise AttributeError("no such internal")
    monkeypatch.setattr(PersistentCache, "get_local_cache_path", staticmethod(broken))
    assert forget_autotune_timings() is False


def test_more_span_lengths_than_dynamo_keeps_graphs_for_are_refused(tiny_dir):
    """Past Dynamo's recompile_limit the warm-up's last graphs would silently stay eager."""
    engine = Engine.load(tiny_dir, device="cpu", warmup=False, compile=False)
    sp, limit = engine.tokenizer.special, torch._dynamo.config.recompile_limit
    lengths = tuple(range(limit - 2, 0, -1))            # with the span and its whole-buffer case: the limit
    assert CompiledSteps(engine.model, 32, sp.eom, sp.pad, lengths).span_lengths == (32, *lengths)
    with pytest.raises(ValueError, match="recompile_limit"):
        CompiledSteps(engine.model, 32, sp.eom, sp.pad, (limit - 1, *lengths))


@pytest.mark.skipif(not HAS_CXX, reason="Inductor needs a C++ compiler")
def test_a_call_that_would_recompile_runs_eagerly(compiled_l32):
    engine = compiled_l32
    model, compiled = engine.model, engine.compiled
    with torch.inference_mode():     # as the engine allocates it (the graphs guard on inference tensors)
        kv = engine.cache.allocate(64)
    compiles = dict(torch._dynamo.utils.counters["frames"])
    tokens = torch.tensor([[40]], dtype=torch.int32)     # compiled for int64 token ids
    assert engine.info["compiled_fallbacks"] == {"denoise": 0, "token": 0, "prefill": 0}
    with torch.inference_mode():
        out = compiled.token_step(tokens, 5, kv)
        expected = model.logits(model.encode_context(tokens, 5, engine.cache.allocate(64)))
    assert torch.allclose(out, expected, atol=1e-5)
    assert dict(torch._dynamo.utils.counters["frames"]) == compiles
    assert engine.info["compiled_fallbacks"] == {"denoise": 0, "token": 1, "prefill": 0}
    # a call the graphs do take still uses them after a fallback (strict: a fallback would raise)
    compiled.strict = True
    with torch.inference_mode():
        compiled.token_step(tokens.long(), 5, kv)
        with pytest.raises(RuntimeError, match="fail_on_recompile"):
            compiled.token_step(tokens, 5, kv)
    assert engine.info["compiled_fallbacks"]["token"] == 1


@pytest.mark.skipif(not HAS_CXX, reason="Inductor needs a C++ compiler")
def test_the_shorter_span_the_loop_cuts_to_has_its_own_compiled_step(compiled_l32):
    engine = compiled_l32
    compiled, V = engine.compiled, engine.model.cfg.vocab_size
    fallbacks, strict = compiled.fallbacks["denoise"], compiled.strict
    lengths = (32, *shrink_lengths(32))
    assert compiled.ready and compiled.span_lengths == lengths and len(lengths) > 2
    compiled.strict = True    # a length the warm-up did not compile for would raise
    compiles = dict(torch._dynamo.utils.counters["frames"])
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        kv = engine.cache.allocate(200)
        engine.model.encode_context(torch.randint(10, V, (1, 120), generator=gen), 0, kv)
        bias, first = torch.zeros(V), torch.zeros(V)
        for n in lengths + lengths[::-1] + lengths[1::2]:      # each after the others
            span = torch.full((1, 32), engine.tokenizer.special.mask)[:, :n]   # strides as the loop's cut leaves them
            span = span.clone(memory_format=torch.contiguous_format) if n < 32 else span
            span[0, n // 2:] = engine.tokenizer.special.pad      # a tail already committed, as after a cut
            masked = span == engine.tokenizer.special.mask
            fast, slow = (span.clone(), masked.clone()), (span.clone(), masked.clone())
            compiled.denoise_step(*fast, 120, kv, bias, first, engine.repeatable, 2)
            compiled._denoise_step(*slow, 120, [(k[:, :, :120 + n], v[:, :, :120 + n]) for k, v in kv],
                                   bias, first, engine.repeatable, torch.tensor(2))
            assert torch.equal(fast[0], slow[0]) and torch.equal(fast[1], slow[1])
            assert (~fast[1]).sum() > n // 2          # it committed something beyond the given tail
    assert compiled.fallbacks["denoise"] == fallbacks and dict(torch._dynamo.utils.counters["frames"]) == compiles
    compiled.strict = strict


@pytest.mark.skipif(not HAS_CXX, reason="Inductor needs a C++ compiler")
def test_a_single_line_request_starts_on_a_short_span_and_runs_compiled(compiled_l32):
    """At a single-line cursor a request that names no span length starts on SINGLE_LINE_SPAN
    positions; that span and the lengths it is cut to are compiled steps, and the text is the eager
    loop's on the same span."""
    from spanfill.engine.decoding.length import SINGLE_LINE_SPAN
    engine, model = compiled_l32, compiled_l32.model
    compiled, strict = engine.compiled, engine.compiled.strict
    spans = []
    span_step = model.span_step

    def watch(span, *args, **kwargs):
        spans.append(span.shape[1])
        return span_step(span, *args, **kwargs)

    graphs = compiled._denoise
    compiled_spans = []

    def count(span, *args):
        compiled_spans.append(span.shape[1])
        return graphs(span, *args)

    compiled.strict = True    # a step the warm-up did not compile would raise instead of running eagerly
    fallbacks = dict(compiled.fallbacks)
    prefix, suffix = "def area(w, h):\n    return w * ", "\n"
    try:
        compiled._denoise = count
        fast = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix))
        compiled._denoise = graphs
        model.span_step = watch       # the eager loop calls the model; the compiled graphs do not
        slow = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, fast_steps=False))
        named = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, fast_steps=False, span_length=32))
        multi = engine.complete(CompletionRequest(prefix="def area(w, h):\n", suffix="\n\nx = 1\n", fast_steps=False))
    finally:
        del model.span_step
        compiled._denoise = graphs
        compiled.strict = strict
    assert compiled_spans and compiled_spans[0] == SINGLE_LINE_SPAN and len(compiled_spans) == fast.steps_run
    assert fast.texts == slow.texts and compiled.fallbacks == fallbacks
    assert spans[0] == SINGLE_LINE_SPAN and max(spans[:slow.steps_run]) == SINGLE_LINE_SPAN
    later = spans[slow.steps_run:]
    assert later[0] == 32                              # a named length is kept
    assert later[named.steps_run] == 32 and multi.steps_run >= 1   # a multi-line cursor starts on the whole span
