"""Token healing (healing.py): the stub's split, the first-position constraint in every decoder, and
the engine's completion text without the stub."""
import torch

import spanfill.engine.engine as engine_module
from spanfill.engine import CompletionRequest
from spanfill.engine.decoding.context_cache import ContextCache
from spanfill.engine.decoding.cuda_step import StaticSpanDenoiser
from spanfill.engine.decoding.denoise import DenoiseConfig, ar_decode, denoise
from spanfill.engine.decoding.healing import Healer
from spanfill.engine.decoding.prompt import context_ids


def test_heal_removes_the_last_prefix_token_and_allows_only_tokens_that_extend_it(tiny_tok):
    healer = Healer(tiny_tok)
    ids = context_ids(tiny_tok, "def f(x):\n    return x.app", "\n")
    healed = healer.heal(ids)
    stub = tiny_tok.token_bytes(ids[-2])
    assert healed.stub == stub and stub and b"app".endswith(stub.lstrip())
    assert healed.ids == ids[:-2] + [ids[-1]]
    allowed = (healed.first_bias == 0).nonzero().flatten().tolist()
    assert allowed and all(tiny_tok.token_bytes(t).startswith(stub) for t in allowed)
    assert ids[-2] in allowed
    rest = [t for t in range(tiny_tok.vocab_size) if t not in set(allowed)]
    assert not any(tiny_tok.token_bytes(t).startswith(stub) for t in rest)
    sp = tiny_tok.special
    assert all(t not in allowed for t in (sp.eom, sp.pad, sp.mask))


def test_heal_leaves_whitespace_and_empty_prefixes_alone(tiny_tok):
    healer = Healer(tiny_tok)
    for prefix in ("def f(x):\n    ", "x = 1\n", ""):
        ids = context_ids(tiny_tok, prefix, "\n")
        healed = healer.heal(ids)
        assert (healed.ids, healed.stub, healed.first_bias) == (ids, b"", None)


def only(token: int, vocab: int) -> torch.Tensor:
    return torch.full((vocab,), float("-inf")).index_fill_(0, torch.tensor([token]), 0.0)


def test_every_decoder_starts_with_an_allowed_token(model_and_tok):
    model, tok = model_and_tok
    sp, V = tok.special, model.cfg.vocab_size
    ids = context_ids(tok, "def add(a, b):\n    return a", "\n")
    lookup = ContextCache(model).prepare(ids, room_after=16, need_hidden=True)
    static = StaticSpanDenoiser(model, sp.mask, sp.eom, sp.pad, graphs=False)
    with torch.inference_mode():
        for token in (50, 77):
            cfg = DenoiseConfig(16, 4, banned=[sp.mask], first_bias=only(token, V))
            ref = denoise(model, lookup.entry.kv, len(ids), 2, cfg, sp.mask, sp.eom, sp.pad)
            assert ref.span[:, 0].tolist() == [token, token]
            assert static.denoise(lookup.entry.kv, len(ids), 2, cfg).span.tolist() == ref.span.tolist()
            ar = ar_decode(model, lookup.entry.kv, len(ids), lookup.entry.last_hidden, 4, sp.eom,
                           first_bias=only(token, V))
            assert ar.span[0, 0].item() == token
        # no bias: the static path's buffer is reset, not left from the last request
        cfg = DenoiseConfig(16, 4, banned=[sp.mask])
        assert (static.denoise(lookup.entry.kv, len(ids), 1, cfg).span.tolist()
                == denoise(model, lookup.entry.kv, len(ids), 1, cfg, sp.mask, sp.eom, sp.pad).span.tolist())


def test_engine_returns_the_completion_without_the_stub(engine, monkeypatch):
    tok = engine.tokenizer
    spans = []

    def recording(*args, **kw):
        out = denoise(*args, **kw)
        spans.append(out.span[0].tolist())
        return out

    monkeypatch.setattr(engine_module, "denoise", recording)
    prefix = "def f(items):\n    return items.app"
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="\n", span_length=12, steps=3, check=None))
    stub = tok.token_bytes(context_ids(tok, prefix, "\n")[-2])
    assert stub
    row = spans[0]
    end = row.index(tok.special.eom) if tok.special.eom in row else len(row)
    data = tok.decode_bytes(t for t in row[:end] if t not in (tok.special.pad, tok.special.mask))
    assert data.startswith(stub)
    assert result.texts[0] == data[len(stub):].decode("utf-8", errors="ignore")
    # switched off, the context keeps the stub and nothing is cut
    plain = engine.complete(CompletionRequest(prefix=prefix, suffix="\n", span_length=12, steps=3, heal=False, check=None))
    assert plain.context_tokens == result.context_tokens + 1

