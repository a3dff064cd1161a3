"""The attention layout of DESIGN §3 and the exactness of the context KV cache."""
import torch

from spanfill.engine.decoding.context_cache import ContextCache
from spanfill.engine.decoding.prompt import context_ids

from spanfill.engine.testing import SAMPLE_PREFIX as PREFIX, SAMPLE_SUFFIX as SUFFIX

TOL = 1e-4  # fp32; cached and uncached paths differ only in summation order


def _span_logits(model, ctx_ids, span):
    cache = ContextCache(model)
    entry = cache.prepare(ctx_ids, room_after=span.shape[1]).entry
    with torch.inference_mode():
        return model.logits(model.span_step(span, len(ctx_ids), entry.kv)), entry


def test_cached_equals_uncached_span_logits(model_and_tok):
    model, tok = model_and_tok
    ids = context_ids(tok, PREFIX, SUFFIX)
    span = torch.full((1, 8), tok.special.mask)
    fresh, _ = _span_logits(model, ids, span)
    cache = ContextCache(model)
    cache.prepare(ids[:-5], room_after=8)             # earlier keystroke state
    entry = cache.prepare(ids, room_after=8).entry    # reuses, encodes the last 5 tokens only
    assert cache.reused_tokens == len(ids) - 5
    with torch.inference_mode():
        cached = model.logits(model.span_step(span, len(ids), entry.kv))
    assert torch.allclose(fresh, cached, atol=TOL), (fresh - cached).abs().max()


def test_span_step_matches_full_training_forward(model_and_tok):
    """span_step over the cache == forward_train with the training mask on the same tokens."""
    model, tok = model_and_tok
    from spanfill.engine.training.samples import Example
    from spanfill.engine.training.objective import build_batch
    ids = context_ids(tok, PREFIX, SUFFIX)
    L = 8
    batch = build_batch([Example(ids, [tok.special.eom], "t")], L, tok.special, torch.Generator().manual_seed(0))
    noised = batch.tokens[:, -L:]
    with torch.inference_mode():
        full = model.forward_train(batch.tokens, batch.positions, batch.mask)[:, -L:]
        cached, _ = _span_logits(model, ids, noised)
    assert torch.allclose(full, cached, atol=TOL)


def test_span_tokens_do_not_change_context_state(model_and_tok):
    model, tok = model_and_tok
    ids = context_ids(tok, PREFIX, SUFFIX)
    cache = ContextCache(model)
    entry = cache.prepare(ids, room_after=8).entry
    before = [(k[:, :, :len(ids)].clone(), v[:, :, :len(ids)].clone()) for k, v in entry.kv]
    with torch.inference_mode():
        a = model.span_step(torch.full((1, 8), tok.special.mask), len(ids), entry.kv)
        b = model.span_step(torch.arange(8)[None] + 10, len(ids), entry.kv)
    assert not torch.allclose(a, b)            # the span sees its own tokens (bidirectional)...
    for (k0, v0), (k, v) in zip(before, entry.kv):
        assert torch.equal(k0, k[:, :, :len(ids)]) and torch.equal(v0, v[:, :, :len(ids)])  # ...the context never does


def test_suffix_token_changes_span_logits(model_and_tok):
    model, tok = model_and_tok
    span = torch.full((1, 8), tok.special.mask)
    a, _ = _span_logits(model, context_ids(tok, PREFIX, SUFFIX), span)
    b, _ = _span_logits(model, context_ids(tok, PREFIX, SUFFIX.replace("Counter", "Timer")), span)
    assert not torch.allclose(a, b, atol=TOL)


def test_span_positions_attend_to_each_other_bidirectionally(model_and_tok):
    """Changing the LAST span token changes the logits at the FIRST position (no causal mask)."""
    model, tok = model_and_tok
    ids = context_ids(tok, PREFIX, SUFFIX)
    span = torch.full((1, 8), tok.special.mask)
    other = span.clone()
    other[0, -1] = 42
    a, _ = _span_logits(model, ids, span)
    b, _ = _span_logits(model, ids, other)
    assert not torch.allclose(a[0, 0], b[0, 0], atol=TOL)


def test_context_is_causal(model_and_tok):
    """Appending context tokens never changes the cached keys of earlier ones."""
    model, tok = model_and_tok
    ids = context_ids(tok, PREFIX, SUFFIX)
    short = ContextCache(model).prepare(ids[:20], room_after=0).entry
    full = ContextCache(model).prepare(ids, room_after=0).entry
    for (ks, _), (kf, _) in zip(short.kv, full.kv):
        assert torch.allclose(ks[:, :, :20], kf[:, :, :20], atol=TOL)


def test_one_candidate_in_scratch_equals_a_batch_of_candidates(model_and_tok):
    """B=1 writes the span's keys/values into the buffers' scratch room; B>1 concatenates. Same logits."""
    model, tok = model_and_tok
    ids = context_ids(tok, PREFIX, SUFFIX)
    spans = torch.stack([torch.full((8,), tok.special.mask), torch.arange(8) + 10])
    entry = ContextCache(model).prepare(ids, room_after=8).entry
    with torch.inference_mode():
        batched = model.span_step(spans, len(ids), entry.kv)
        singles = torch.cat([model.span_step(spans[i:i + 1], len(ids), entry.kv) for i in range(2)])
    assert torch.allclose(batched, singles, atol=TOL), (batched - singles).abs().max()


def test_one_typed_token_in_bf16_encodes_as_the_whole_context_does(model_and_tok):
    """The one-token path (an AR token, one typed character: SDPA with one query and no mask) in
    bf16 on the CPU: the last token's hidden state as when the context is encoded in one pass. The
    attention weights are scaled up so that attention, not the token's own embedding, decides the
    hidden state: the same token encoded one position off is far from it."""
    import copy
    model, tok = model_and_tok
    model = copy.deepcopy(model)
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.wqkv.weight.mul_(10)
            layer.attn.wo.weight.mul_(10)
    model = model.to(torch.bfloat16)
    ids = torch.tensor([context_ids(tok, PREFIX, SUFFIX)])
    N = ids.shape[1]

    def typed_last(position):
        with torch.inference_mode():
            kv = model.allocate_kv(N)
            model.encode_context(ids[:, :-1], 0, kv)
            return model.encode_context(ids[:, -1:], position, kv)
    with torch.inference_mode():
        whole = model.encode_context(ids, 0, model.allocate_kv(N)).float()
    typed = typed_last(N - 1)
    tolerance = 0.02 * whole.abs().max()
    assert typed.dtype == torch.bfloat16
    assert torch.allclose(typed.float(), whole, atol=tolerance), (typed.float() - whole).abs().max()
    assert not torch.allclose(typed_last(N - 2).float(), whole, atol=tolerance)
