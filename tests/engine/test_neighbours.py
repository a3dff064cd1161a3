"""No token twice in a row (neighbours.py): the pure pieces, the step loop on a table model, the engine."""
import torch

from spanfill.engine import CompletionRequest
from spanfill.engine.decoding.denoise import DenoiseConfig, denoise, greedy
from spanfill.engine.decoding.neighbours import ban_committed_neighbours, pick_apart, repeatable_tokens, twins
from test_denoise import Table   # the table stand-in model (tests/engine is on sys.path under pytest's rootdir import mode)

PAD, MASK, EOM, V = 0, 1, 2, 16
BLANK = 9                                   # a token that may repeat (indentation, say)
REPEATABLE = torch.zeros(V, dtype=torch.bool)
REPEATABLE[[PAD, MASK, EOM, BLANK]] = True


def test_repeatable_tokens_are_blank_runs_of_one_character_and_control_ones():
    text = {3: b"  ", 4: b"\n", 5: b"x", 6: b"))", 7: b"====", 8: b",", 9: b" =", 10: b"xx"}
    rep = repeatable_tokens(12, lambda i: text.get(i, b"ab"), [0, 1, 2])
    assert rep.tolist() == [True, True, True, True, True, False, True, True, False, False, True, False]


def test_a_masked_position_may_not_repeat_a_committed_neighbour():
    span = torch.tensor([[5, MASK, MASK, 6, MASK, BLANK, MASK]])
    masked = span == MASK
    logits = torch.zeros(1, 7, V)
    ban_committed_neighbours(logits, span, masked, REPEATABLE)
    banned = [sorted(torch.nonzero(row < -1000).flatten().tolist()) for row in logits[0]]
    # 1: left 5; 2: right 6; 4: left 6 (right is blank: may repeat); 6: left blank; committed: untouched
    assert banned == [[], [5], [6], [], [6], [], []]


def test_of_two_neighbours_proposing_the_same_token_the_less_sure_one_is_marked():
    token = torch.tensor([[5, 5, 7, BLANK, BLANK, 8, 8]])
    conf = torch.tensor([[0.9, 0.4, 0.5, 0.5, 0.5, 0.3, 0.6]])
    masked = torch.tensor([[True, True, True, True, True, True, False]])
    # (0, 1): 1 is less sure; blanks may repeat; (5, 6): 6 is committed, so no pair in this step
    assert twins(token, conf, masked, REPEATABLE).tolist() == [[False, True, False, False, False, False, False]]


def test_pick_apart_gives_the_less_sure_twin_its_next_choice_with_its_probability():
    logits = torch.full((1, 2, V), -30.0)
    logits[0, 0, 5], logits[0, 0, 6] = 3.0, 1.0
    logits[0, 1, 5], logits[0, 1, 7] = 2.0, 1.5
    span = torch.full((1, 2), MASK)
    probs = torch.softmax(logits[0, 1], -1)
    conf, token = pick_apart(logits.clone(), span, span == MASK, REPEATABLE, greedy)
    assert token.tolist() == [[5, 7]]
    assert torch.allclose(conf[0, 1], probs[7], atol=1e-6)
    assert conf[0, 0] > 0.8


def test_a_position_whose_one_allowed_token_repeats_its_neighbour_keeps_it_when_sampling():
    """Token healing can leave position 0 a single allowed token; banning it must not leave an empty
    distribution (torch.multinomial fails on one)."""
    from spanfill.engine.decoding.denoise import pick_tokens
    logits = torch.full((1, 2, V), float("-inf"))
    logits[0, 0, 5] = 0.0                               # position 0: only 5 is allowed
    logits[0, 1, 5], logits[0, 1, 7] = 1.0, 0.5
    span = torch.tensor([[MASK, 5]])                    # ... and 5 is committed at position 1
    gen = torch.Generator().manual_seed(0)
    conf, token = pick_apart(logits, span, span == MASK, REPEATABLE, lambda x: pick_tokens(x, 1.0, 1.0, gen))
    assert token[0, 0] == 5 and torch.isfinite(conf[0, 0])
    twin = torch.full((1, 2, V), float("-inf"))
    twin[0, :, 5] = 0.0                                 # both masked, both allowed 5 alone: both keep it
    conf, token = pick_apart(twin, torch.full((1, 2), MASK), torch.ones(1, 2, dtype=torch.bool), REPEATABLE,
                             lambda x: pick_tokens(x, 1.0, 1.0, gen))
    assert token.tolist() == [[5, 5]]


def test_a_pair_that_still_repeats_after_the_next_choices_is_committed_last():
    """Three neighbours propose 5 and share their next choice, 7: the two that give way would both
    take 7. One of them waits for a later step instead, where 7 beside it is banned."""
    L = 5
    table = torch.full((L, V), -5.0)
    table[:3, 5], table[:3, 7] = 4.0, 3.0
    table[3:, 11:15] = 0.0                             # two unsure positions, less sure than any 7
    row = denoise(Table(table), None, 0, 1, DenoiseConfig(L, 2, "fixed", repeatable=REPEATABLE), MASK, EOM,
                  PAD).span[0].tolist()
    assert all(a != b for a, b in zip(row, row[1:])), row
    assert row[:3] == [5, 7, 5]


def test_denoise_writes_no_token_twice_in_a_row():
    L = 6
    table = torch.full((L, V), -5.0)
    table[:, 5] = 4.0                                   # every position's first choice: 5
    table[torch.arange(L), torch.tensor([6, 7, 8, 10, 11, 12])] = 3.0
    model = Table(table)
    plain = denoise(model, None, 0, 1, DenoiseConfig(L, 3, "fixed"), MASK, EOM, PAD).span[0].tolist()
    assert plain == [5] * L
    apart = denoise(model, None, 0, 1, DenoiseConfig(L, 3, "fixed", repeatable=REPEATABLE), MASK, EOM, PAD)
    row = apart.span[0].tolist()
    assert all(a != b for a, b in zip(row, row[1:])), row
    assert row.count(5) == L // 2


def test_the_engine_writes_no_token_twice_in_a_row(engine, monkeypatch):
    from spanfill.engine import engine as engine_module
    spans = []

    def recording(*args, **kwargs):
        out = denoise(*args, **kwargs)
        spans.append(out.span[0].tolist())
        return out
    monkeypatch.setattr(engine_module, "denoise", recording)
    x = engine.tokenizer.encode("x")[0]
    original = engine.model.logits

    def says_x(h):                     # every position's first choice is `x`; <|eom|> and pads never
        out = original(h)
        sp = engine.tokenizer.special
        out[..., [sp.eom, sp.pad]] = float("-inf")
        out[..., x] = 1e4
        return out
    engine.model.logits = says_x
    engine.complete(CompletionRequest(prefix="total = compute(", suffix=")\n", span_length=8, steps=4, heal=False,
                                      fast_steps=False))
    row = spans[-1]
    assert len(row) == 8 and x in row
    assert all(a != b for a, b in zip(row, row[1:])), row
