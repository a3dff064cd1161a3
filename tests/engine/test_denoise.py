"""The denoiser's pure pieces and its step loop, on a scripted stand-in model."""
import types

import torch

from spanfill.engine.decoding.denoise import (DenoiseConfig, StepPlan, apply_commit, choose_commit, commit_content,
                                              commit_schedule, commit_spread, commit_threshold, commit_topk, denoise,
                                              pick_tokens, sampler)
from spanfill.engine.decoding.length import (END_CONFIDENCE, SHRINK_TO, end_position, fix_end, held_ends, shrink_lengths,
                                             shrunk_length, trailing_pads, truncate_after_eom)

MASK, EOM, PAD, V = 1, 2, 0, 16


def test_commit_schedule_spreads_the_span_over_the_steps():
    assert commit_schedule(32, 4) == [8, 8, 8, 8]
    assert commit_schedule(10, 4) == [3, 3, 2, 2]
    assert commit_schedule(4, 8) == [1, 1, 1, 1]       # never more steps than positions
    assert sum(commit_schedule(64, 3)) == 64


def test_commit_topk_only_commits_masked_positions():
    conf = torch.tensor([[0.9, 0.1, 0.8, 0.7]])
    masked = torch.tensor([[False, True, True, True]])
    assert commit_topk(conf, masked, 2).tolist() == [[False, False, True, True]]


def test_commit_threshold_takes_all_above_tau_or_the_best_one():
    conf = torch.tensor([[0.95, 0.2, 0.99, 0.5], [0.1, 0.3, 0.2, 0.05]])
    masked = torch.ones(2, 4, dtype=torch.bool)
    assert commit_threshold(conf, masked, 0.9).tolist() == [[True, False, True, False], [False, True, False, False]]


def test_trailing_pads_run_from_the_right_end_and_need_confidence():
    span = torch.tensor([[MASK, MASK, MASK, MASK, PAD, PAD]])           # the last two already pad
    masked = torch.tensor([[True, True, True, True, False, False]])
    proposal = torch.tensor([[5, PAD, PAD, PAD, PAD, PAD]])
    conf = torch.tensor([[0.9, 0.99, 0.4, 0.8, -1.0, -1.0]])
    # 3 joins the committed pads; 2 is too unsure and ends the run, so 1 (a pad inside the text) stays
    assert trailing_pads(span, masked, conf, proposal, PAD).tolist() == [[False, False, False, True, False, False]]
    assert trailing_pads(span, masked, conf, proposal, PAD, min_confidence=0.3).tolist() == [
        [False, True, True, True, False, False]]


def test_commit_spread_gives_each_row_its_share_of_the_steps_left():
    conf = torch.tensor([[0.1, 0.9, 0.5, 0.7, 0.3], [0.9, 0.8, 0.7, 0.6, 0.5]])
    content = torch.tensor([[True, True, True, True, True], [False, False, True, True, False]])
    # row 0: 5 positions over 2 steps -> 3 now; row 1: 2 positions over 2 steps -> 1 now
    assert commit_spread(conf, content, 2).tolist() == [[False, True, True, True, False],
                                                         [False, False, True, False, False]]
    assert commit_spread(conf, content, torch.tensor(1)).tolist() == content.tolist()   # last step: all


def test_content_rule_commits_trailing_pads_for_free_where_fixed_spends_the_step_on_them():
    span = torch.full((1, 6), MASK)
    masked = torch.ones(1, 6, dtype=torch.bool)
    proposal = torch.tensor([[5, 6, EOM, PAD, PAD, PAD]])
    conf = torch.tensor([[0.6, 0.5, 0.4, 0.9, 0.95, 0.99]])
    assert commit_topk(conf, masked, 2).tolist() == [[False, False, False, False, True, True]]
    assert commit_content(span, masked, conf, proposal, 3, PAD).tolist() == [[True, False, False, True, True, True]]


def test_step_plan_counts_the_steps_left():
    assert [(s.k, s.left, s.final) for s in StepPlan(10, 4)] == [(3, 4, False), (3, 3, False), (2, 2, False),
                                                                 (2, 1, True)]


def test_steps_with_equal_keys_commit_alike_and_only_those_share_a_key():
    """Step.key is what a CUDA graph is captured under: two steps may share a graph only if the
    rule commits the same positions for both, whatever the state."""
    torch.manual_seed(0)
    steps = sorted(set(StepPlan(32, 8)) | set(StepPlan(32, 4)) | set(StepPlan(30, 4)), key=repr)
    for rule in ("fixed", "content", "threshold"):
        cfg = DenoiseConfig(32, 8, rule=rule)
        commits = {}
        for _ in range(20):
            masked = torch.rand(3, 32) < 0.8
            span = torch.where(masked, MASK, torch.randint(3, V, (3, 32)))
            proposal = torch.where(torch.rand(3, 32) < 0.5, PAD, torch.randint(3, V, (3, 32)))
            conf = torch.rand(3, 32)
            for step in steps:
                s, m = span.clone(), masked.clone()
                apply_commit(s, m, choose_commit(s, m, conf, proposal, step.left, step.k, rule, cfg.threshold, PAD),
                             proposal, EOM, PAD)
                commits.setdefault(step, []).append(s.tolist())
        for a in steps:
            for b in steps:
                assert (a.key(rule) == b.key(rule)) == (commits[a] == commits[b]), (rule, a, b)
    fixed, content = ({s.key(rule) for s in StepPlan(32, 4)} for rule in ("fixed", "content"))
    assert len(fixed) == 2 and len(content) == 4     # fixed: k=8 thrice, then the final step


def test_commit_pieces_match_their_sort_and_scan_definitions():
    """trailing_pads, commit_spread and truncate_after_eom are written as reductions and pairwise
    counts (they compile into fused loops); hold them to the plain scan/sort definitions, ties included."""
    torch.manual_seed(1)
    for _ in range(50):
        masked = torch.rand(4, 12) < 0.7
        span = torch.where(masked, MASK, torch.randint(0, 6, (4, 12)))
        proposal = torch.randint(0, 6, (4, 12))
        conf = torch.randint(0, 4, (4, 12)).float() / 4          # many ties
        token = torch.where(masked, proposal, span)
        padded = (token == PAD) & (~masked | (conf > 0.5))
        assert torch.equal(trailing_pads(span, masked, conf, proposal, PAD),
                           padded.flip(1).long().cumprod(1).flip(1).bool() & masked)
        for left in (1, 2, 3):
            c = conf.masked_fill(~masked, float("-inf"))
            order = c.argsort(dim=1, descending=True, stable=True)
            rank = torch.empty_like(order).scatter_(1, order, torch.arange(12).expand_as(order))
            k = (masked.sum(1, keepdim=True) + left - 1) // left
            assert torch.equal(commit_spread(conf, masked, left), masked & (rank < k))
        s, m = span.clone(), masked.clone()
        s[torch.rand(4, 12) < 0.2] = EOM
        m &= s != EOM
        expected_after = ((s == EOM) & ~m).long().cumsum(1) - ((s == EOM) & ~m).long() > 0
        want_span, want_masked = s.masked_fill(expected_after, PAD), m & ~expected_after
        truncate_after_eom(s, m, EOM, PAD)
        assert torch.equal(s, want_span) and torch.equal(m, want_masked)


def test_truncate_after_eom():
    span = torch.tensor([[5, EOM, MASK, MASK], [5, 6, 7, MASK]])
    masked = torch.tensor([[False, False, True, True], [False, False, False, True]])
    truncate_after_eom(span, masked, EOM, PAD)
    assert span.tolist() == [[5, EOM, PAD, PAD], [5, 6, 7, MASK]]
    assert masked.tolist() == [[False, False, False, False], [False, False, False, True]]


def test_pick_tokens_greedy_and_top_p():
    logits = torch.tensor([[0.0, 5.0, 1.0]])
    conf, tok = pick_tokens(logits)
    assert tok.item() == 1 and abs(conf.item() - torch.softmax(logits, -1)[0, 1].item()) < 1e-6
    g = torch.Generator().manual_seed(0)
    samples = {pick_tokens(logits, 1.0, 0.5, g)[1].item() for _ in range(50)}
    assert samples == {1}                               # nucleus of 0.5 holds only the top token


class Scripted:
    """Position i proposes script[i] with confidence falling with i, so commits go left to right."""
    def __init__(self, script):
        self.script = torch.tensor(script)
        self.embed = types.SimpleNamespace(weight=torch.zeros(1))
        self.cfg = types.SimpleNamespace(vocab_size=V)
        self.calls = 0

    def span_step(self, span, context_len, kv, positions=None, key_mask=None):
        self.calls += 1
        n, L = span.shape
        return torch.arange(L, dtype=torch.float32).expand(n, L)[..., None]

    def logits(self, h):
        pos = h[..., 0].long()
        out = torch.full((*pos.shape, V), -10.0)
        out.scatter_(-1, self.script[pos][..., None], 10.0 - pos[..., None].float())
        return out


def test_denoise_stops_once_eom_leaves_nothing_masked():
    model = Scripted([5, 6, EOM, 7, 7, 7, 7, 7])
    out = denoise(model, None, 0, 1, DenoiseConfig(8, 4, "fixed"), MASK, EOM, PAD)
    assert out.span.tolist() == [[5, 6, EOM, PAD, PAD, PAD, PAD, PAD]]
    assert out.steps_run == model.calls == 2   # step 1 commits 0-1, step 2 commits 2 (<|eom|>) and 3 drops out


def test_denoise_fixed_schedule_without_eom_runs_all_steps():
    model = Scripted([5] * 8)
    out = denoise(model, None, 0, 2, DenoiseConfig(8, 4, "fixed"), MASK, EOM, PAD)
    assert out.steps_run == 4 and out.span.tolist() == [[5] * 8] * 2


def test_denoise_content_rule_fills_the_pads_first_then_one_text_token_per_step():
    seen = []

    class Watch(Scripted):
        def span_step(self, span, *args):
            seen.append((span != MASK).sum().item())
            return super().span_step(span, *args)

    model = Watch([5, 6, 7, EOM] + [PAD] * 12)
    out = denoise(model, None, 0, 1, DenoiseConfig(16, 4), MASK, EOM, PAD)
    assert out.span.tolist() == [[5, 6, 7, EOM] + [PAD] * 12] and out.steps_run == 4
    assert seen == [0, 13, 14, 15]    # step 1: 12 pads + 1 text token; then one text token per step


def test_shrunk_length_keeps_everything_but_committed_trailing_pads():
    M = MASK
    def length(rows, masked_cols=(), lengths=(8, 16)):
        span = torch.tensor(rows)
        masked = torch.zeros_like(span, dtype=torch.bool)
        masked[:, list(masked_cols)] = True
        return shrunk_length(span, masked, PAD, lengths)
    tail = [PAD] * 24
    assert length([[5, 6, EOM, PAD, PAD, PAD, PAD, PAD] + tail]) == 8
    assert length([[5] * 9 + [PAD] * 23]) == 16                    # 9 live positions: 16 holds them, 8 does not
    assert length([[M, 6, EOM, PAD] + [PAD] * 28], masked_cols=[0, 20]) == 32   # a masked position in the tail
    assert length([[5, 6, EOM, PAD] + [PAD] * 28, [5] * 12 + [PAD] * 20]) == 16  # the longest row decides
    assert length([[5] * 30 + [PAD, PAD]]) == 32                  # nothing shorter holds it
    assert length([[5, PAD, PAD, PAD]], lengths=(8, 16)) == 4     # only lengths shorter than the span
    assert shrink_lengths(32, (16, 8)) == (16, 8) and shrink_lengths(16, (16, 8)) == (8,) and shrink_lengths(8, (16, 8)) == ()
    assert shrink_lengths(32, (8, 24, 16, 8)) == (24, 16, 8)      # longest first, each once
    assert shrink_lengths(64) == tuple(sorted(SHRINK_TO, reverse=True))   # SHRINK_TO by default
    # a head-placed end past 16 (a multi-line middle) is cut to 24, not run on all 32 positions
    assert shrink_lengths(32) == (24, 16, 8)
    assert length([[5] * 20 + [EOM] + [PAD] * 11], lengths=shrink_lengths(32)) == 24


def test_denoise_cuts_the_span_once_its_tail_is_pads():
    shapes = []

    class Watch(Scripted):   # sure of the pads, less sure of text the further right it is
        def span_step(self, span, *args):
            shapes.append(span.shape[1])
            return super().span_step(span, *args)

        def logits(self, h):
            out = super().logits(h)
            out[..., PAD] = torch.where(self.script[h[..., 0].long()] == PAD, 30.0, -10.0)
            return out

    script = [5, 6, 7, 8, EOM] + [PAD] * 27
    cut = denoise(Watch(script), None, 0, 1, DenoiseConfig(32, 4, shrink_to=(16,)), MASK, EOM, PAD)
    assert shapes == [32, 16, 16, 16]    # step 1 commits the 27 pads and a text token; the rest run on 16
    shapes.clear()
    whole = denoise(Watch(script), None, 0, 1, DenoiseConfig(32, 4), MASK, EOM, PAD)
    assert shapes == [32] * 4 and whole.steps_run == cut.steps_run == 4
    assert cut.span.tolist() == [whole.span[0, :16].tolist()] == [[5, 6, 7, 8, EOM] + [PAD] * 11]


def test_deadline_makes_the_next_step_the_last():
    model = Scripted([5] * 8)
    out = denoise(model, None, 0, 1, DenoiseConfig(8, 4), MASK, EOM, PAD, deadline=0.0)
    assert out.deadline_hit and out.steps_run == 1 and out.span.tolist() == [[5] * 8]   # nothing left masked


# ---- length strategies --------------------------------------------------------------------------

def test_late_end_holds_unsure_end_tokens_and_left_end_those_with_undecided_text_before_them():
    masked = torch.tensor([[False, True, True, True, True]])
    proposal = torch.tensor([[5, EOM, 6, PAD, EOM]])
    conf = torch.tensor([[1.0, 0.5, 0.8, END_CONFIDENCE + 0.05, END_CONFIDENCE]])
    assert held_ends(masked, conf, proposal, "late-end", EOM, PAD).tolist() == [[False, True, False, False, True]]
    # position 1 is the first undecided one: its <|eom|> may commit, the later end tokens wait
    assert held_ends(masked, conf, proposal, "left-end", EOM, PAD).tolist() == [[False, False, False, True, True]]
    assert not held_ends(masked, conf, proposal, "pad", EOM, PAD).any()


def test_held_end_tokens_give_their_share_of_the_step_to_text_and_commit_on_the_final_step():
    span = torch.full((1, 6), MASK)
    masked = torch.ones(1, 6, dtype=torch.bool)
    proposal = torch.tensor([[5, EOM, 6, 7, 8, 9]])
    conf = torch.tensor([[0.6, 0.7, 0.5, 0.4, 0.3, 0.2]])      # the <|eom|> is the most confident proposal
    pad_rule = choose_commit(span, masked, conf, proposal, 3, 0, "content", 0.9, PAD)
    assert pad_rule.tolist() == [[True, True, False, False, False, False]]    # ceil(6/3) = 2: the <|eom|> among them
    late = choose_commit(span, masked, conf, proposal, 3, 0, "content", 0.9, PAD, "late-end", EOM)
    assert late.tolist() == [[True, False, True, False, False, False]]        # its place goes to the next best
    final = choose_commit(span, masked, conf, proposal, 1, 0, "content", 0.9, PAD, "late-end", EOM)
    assert final.tolist() == masked.tolist()
    fixed = choose_commit(span, masked, conf, proposal, 3, 2, "fixed", 0.9, PAD, "left-end", EOM)
    assert fixed.tolist() == [[True, False, True, False, False, False]]
    # the compiled step passes steps_left as a tensor: the same choice
    assert torch.equal(choose_commit(span, masked, conf, proposal, torch.tensor(3), 0, "content", 0.9, PAD,
                                     "late-end", EOM), late)


def test_strict_pad_asks_more_confidence_of_the_trailing_pads():
    span = torch.full((1, 4), MASK)
    masked = torch.ones(1, 4, dtype=torch.bool)
    proposal = torch.tensor([[5, 6, PAD, PAD]])
    conf = torch.tensor([[0.9, 0.8, 0.95, 0.7]])
    tail = [[False, False, True, True]]
    assert (choose_commit(span, masked, conf, proposal, 4, 0, "content", 0.9, PAD) & torch.tensor(tail)).tolist() == tail
    strict = choose_commit(span, masked, conf, proposal, 4, 0, "content", 0.9, PAD, "strict-pad", EOM)
    assert strict.tolist() == [[False, False, True, False]]    # 0.7 is not sure enough: one content commit instead


def test_end_position_is_the_mode_mean_or_median_of_where_eom_falls():
    p = torch.tensor([[0.0, 0.4, 0.0, 0.0, 0.3, 0.3]])
    assert end_position(p).tolist() == [[1]]
    assert end_position(p, "mean").tolist() == [[round(0.4 * 1 + 0.3 * 4 + 0.3 * 5)]]
    assert end_position(p, "median").tolist() == [[4]]          # 0.4 of the mass lies before 4
    assert end_position(p * 0.5, "median").tolist() == [[4]]    # unnormalised: the same


def test_fix_end_places_eom_on_the_first_step_and_keeps_end_tokens_out_of_the_text_before_it():
    L = 6
    logits = torch.zeros(2, L, V)
    logits[:, :, EOM] = torch.tensor([0.0, 1.0, 3.0, 0.0, 0.0, 0.0])     # position 2 is where <|eom|> most likely falls
    logits[:, 1, PAD] = 9.0                                             # an unsure pad inside the text
    span = torch.full((2, L), MASK)
    masked = torch.ones(2, L, dtype=torch.bool)
    span[1, 0], masked[1, 0] = 5, False                                 # row 1 is past its first step
    fix_end(logits, span, masked, EOM, PAD)
    assert span.tolist() == [[MASK, MASK, EOM, PAD, PAD, PAD], [5] + [MASK] * 5]
    assert masked.tolist() == [[True, True, False, False, False, False], [False] + [True] * 5]
    assert logits[0, :2, EOM].eq(float("-inf")).all() and logits[0, :2, PAD].eq(float("-inf")).all()
    assert logits[1, :, PAD].isfinite().all()                            # no <|eom|> committed there: nothing banned


class Table:
    """A stand-in model whose position i always has the logits table[i] (whatever the span holds)."""
    def __init__(self, table):
        self.table = table
        self.embed = types.SimpleNamespace(weight=torch.zeros(1))
        self.cfg = types.SimpleNamespace(vocab_size=V)

    def span_step(self, span, context_len, kv, positions=None, key_mask=None):
        n, L = span.shape
        return torch.arange(L, dtype=torch.float32).expand(n, L)[..., None]

    def logits(self, h):
        return self.table[h[..., 0].long()]


def test_denoise_first_step_fixes_the_end_where_pad_lets_an_inner_pad_and_early_eom_cut_the_text():
    L = 8
    table = torch.full((L, V), -5.0)
    table[torch.arange(L), torch.tensor([5, 6, 7, 8, 9, 10, 11, 12])] = 2.0   # the text the model would write
    table[1, EOM] = 4.0                          # an early <|eom|>, surer than the text at position 1
    table[3, PAD] = 3.0                          # a pad inside the text
    table[4:, EOM] = torch.tensor([1.0, 5.0, 1.0, 1.0])   # but <|eom|> most likely falls at 5
    table[6:, PAD] = 8.0
    pad = denoise(Table(table), None, 0, 1, DenoiseConfig(L, 4), MASK, EOM, PAD).span.tolist()
    assert pad == [[5, EOM] + [PAD] * 6]
    first = denoise(Table(table), None, 0, 1, DenoiseConfig(L, 4, length="first-step"), MASK, EOM, PAD).span.tolist()
    assert first == [[5, 6, 7, 8, 9, EOM, PAD, PAD]]


def test_a_single_line_cursor_starts_on_a_shorter_span():
    from spanfill.engine.decoding.length import SINGLE_LINE_SPAN, start_span
    assert start_span(32, "x = foo(", ")\n") == SINGLE_LINE_SPAN == 16
    assert start_span(8, "x = foo(", ")\n") == 8                 # never longer than the model's span
    assert start_span(32, "def f(x):\n", "\n\ny = 2\n") == 32     # a multi-line cursor: the whole span


def test_greedy_first_keeps_candidate_0_greedy_on_a_span_cut_shorter_than_the_span():
    """Two candidates of a span of 8 cut to 4: rows 0-3 are candidate 0's (greedy), rows 4-7 the
    sampled candidate's, whatever the configured span length."""
    cfg = DenoiseConfig(8, 4, temperature=50.0, greedy_first=True)
    logits = torch.zeros(8, V)
    logits[:, 3] = 1.0                                   # greedy: 3; hot samples: anything
    conf, token = sampler(cfg, torch.Generator().manual_seed(0), 2)(logits)
    assert token[:4].tolist() == [3] * 4
    assert token[4:].tolist() != [3] * 4 and conf.shape == (8,)
