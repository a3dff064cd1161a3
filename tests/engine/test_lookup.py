"""Prompt lookup in greedy AR decoding (denoise.ar_decode's `lookup`): proposals from the context checked in
the token's own pass, the same tokens as token-by-token AR in fewer passes, and the engine's use of it."""
import pytest
import torch

from spanfill.engine import CompletionRequest
from spanfill.engine.decoding import denoise
from spanfill.engine.decoding.check import check_draft
from spanfill.engine.decoding.denoise import LOOKUP_TOKENS, ar_decode, lookup_proposal
from spanfill.engine.decoding.prompt import context_ids

V = 64


def test_lookup_proposes_what_followed_the_last_earlier_occurrence_of_the_last_token():
    assert lookup_proposal([1, 2, 3, 9, 1, 5, 6, 7, 1], 3) == [5, 6, 7]      # the latest earlier 1, not the first
    assert lookup_proposal([1, 2, 3, 1], 5) == [2, 3, 1]                     # as far as the sequence goes
    assert lookup_proposal([4, 5, 6], 2) == []                               # 6 never came before
    assert lookup_proposal([1, 2, 1], 0) == [] and lookup_proposal([], 3) == []


class NextOf:
    """A causal model whose choice after token t is NEXT[t], whatever came before; every forward pass
    is recorded as (start, ids), and writing past the cache's room fails."""

    def __init__(self, room: int):
        self.passes: list[tuple[int, list[int]]] = []
        self.room = room

    def encode_context(self, tokens, start, kv, every=False):
        ids = tokens[0].tolist()
        assert start + len(ids) <= self.room, "wrote past the room the caller gave"
        self.passes.append((start, ids))
        hidden = torch.nn.functional.one_hot(torch.tensor([NEXT[t] for t in ids]), V).float()
        return hidden if every else hidden[-1:]

    def logits(self, hidden):
        return hidden * 10.0


# 10 -> 11 -> ... -> 20 -> 2 (<|eom|>), the same run the context holds
NEXT = {t: t + 1 for t in range(V)}
NEXT[20] = 2
CONTEXT = [5, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 2, 7, 9]


def decode(model, max_tokens, lookup, stop=None):
    first = torch.nn.functional.one_hot(torch.tensor([10]), V).float()      # the middle starts with 10
    return ar_decode(model, None, len(CONTEXT), first, max_tokens, 2, stop=stop, lookup=lookup)


def test_lookup_writes_the_same_tokens_in_fewer_passes():
    alone, looked = NextOf(100), NextOf(100)
    plain = decode(alone, 20, None)
    fast = decode(looked, 20, CONTEXT)
    assert plain.span[0].tolist() == fast.span[0].tolist() == list(range(10, 21)) + [2]
    assert plain.steps_run == 12 and len(alone.passes) == 11            # one pass a token after the first
    # each pass checks the token and LOOKUP_TOKENS proposals, all of them AR's own choices
    assert len(looked.passes) == fast.steps_run - 1 < len(alone.passes)
    assert all(len(ids) == 1 + LOOKUP_TOKENS for _, ids in looked.passes[:-1])
    starts = [start for start, _ in looked.passes]
    assert starts == sorted(starts) and starts[0] == len(CONTEXT)      # each pass starts at its first token's position


def test_a_wrong_proposal_costs_nothing_but_its_rows():
    """The context says 12 follows 11 but this model writes 13: its pass still gives AR's token, and the next
    pass starts at that token's position, over the stale proposal."""
    context = [11, 12, 30, 31]
    model = NextOf(100)
    NEXT_11 = NEXT[11]
    try:
        NEXT[11] = 13
        first = torch.nn.functional.one_hot(torch.tensor([11]), V).float()
        out = ar_decode(model, None, 4, first, 5, 2, lookup=context)
        alone = ar_decode(NextOf(100), None, 4, first, 5, 2)
    finally:
        NEXT[11] = NEXT_11
    assert out.span[0].tolist() == alone.span[0].tolist() == [11, 13, 14, 15, 16]
    assert model.passes[0] == (4, [11, 12, 30, 31])  # 11, then what the context had after it
    assert model.passes[1][0] == 5                   # 13 at position 5, where the stale 12 was


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 5, 8])
def test_lookup_stays_inside_max_tokens_and_the_room(max_tokens):
    room = len(CONTEXT) + max_tokens                 # what ar_decode's callers allocate
    plain = decode(NextOf(room), max_tokens, None).span[0].tolist()
    fast = decode(NextOf(room), max_tokens, CONTEXT).span[0].tolist()
    assert fast == plain and len(fast) == max_tokens


def test_stop_ends_lookup_as_it_ends_ar():
    stop = lambda tokens: tokens[-1] == 14               # noqa: E731
    assert decode(NextOf(100), 20, CONTEXT, stop).span[0].tolist() == [10, 11, 12, 13, 14]


def test_sampling_does_not_look_up():
    model = NextOf(100)
    first = torch.nn.functional.one_hot(torch.tensor([10]), V).float()
    ar_decode(model, None, len(CONTEXT), first, 6, 2, temperature=0.5, generator=torch.Generator().manual_seed(0),
              lookup=CONTEXT)
    assert all(len(ids) == 1 for _, ids in model.passes)


REPEATING = "def area(w, h):\n    return w * h\n\n\ndef volume(w, h, d):\n    return w * h * d\n\n\ndef twice(w, h):\n    return "


def test_the_tiny_models_ar_is_the_same_with_lookup(engine):
    """Real weights: the middle token for token as without lookup, from the context, and after a draft's
    kept tokens (check_draft's rest)."""
    model, sp = engine.model, engine.tokenizer.special
    ids = context_ids(engine.tokenizer, REPEATING, "\n", budget=engine.budget)
    banned = [sp.pad, sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle]
    kv = model.allocate_kv(len(ids) + 24)
    with torch.inference_mode():
        last = model.encode_context(torch.tensor([ids]), 0, kv)
        alone = ar_decode(model, kv, len(ids), last, 24, sp.eom, banned=banned)
        looked = ar_decode(model, kv, len(ids), last, 24, sp.eom, banned=banned, lookup=ids)
        draft = alone.span[0].tolist()[:3] + [ids[-5]]
        checked = check_draft(model, kv, len(ids), last, draft, 1.0, 24, sp.eom, banned, lookup=ids)
    assert looked.span[0].tolist() == alone.span[0].tolist() == checked.tokens
    assert looked.steps_run <= alone.steps_run


def test_the_engine_looks_up_in_ar_mode_and_after_the_check(engine, monkeypatch):
    seen = []
    real = denoise.lookup_proposal

    def spy(seq, k):
        seen.append(k)
        return real(seq, k)
    monkeypatch.setattr(denoise, "lookup_proposal", spy)
    engine.complete(CompletionRequest(prefix=REPEATING, suffix="\n", mode="ar", span_length=8))
    assert seen and max(seen) > 0, "AR mode decoded without lookup"
    seen.clear()
    engine.complete(CompletionRequest(prefix=REPEATING, suffix="\n", check=1.0, span_length=8))
    assert seen and max(seen) > 0, "the check's rest decoded without lookup"
    seen.clear()
    monkeypatch.setattr(engine, "lookup_tokens", 0)        # off: nothing proposed
    engine.complete(CompletionRequest(prefix=REPEATING, suffix="\n", mode="ar", span_length=8))
    assert seen and max(seen) == 0
