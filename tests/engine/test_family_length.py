"""The length strategies of engine/families/length.py on plain tensors: the content/end split from
end-token probabilities, the choice among candidate lengths by first-step confidence, and DreamOn's
expand/delete edit of a span."""
import torch

from spanfill.engine.families.length import candidate_lengths, choose_length, end_split, expand_delete, length_scores

MASK, EXPAND, DELETE = 0, 1, 2


def test_end_split_puts_the_end_where_end_tokens_become_likely():
    p_end = torch.tensor([[0.01, 0.02, 0.9, 0.95, 0.99],     # content, content, then ends
                          [0.01, 0.01, 0.01, 0.01, 0.01],     # never an end: the whole span
                          [0.99, 0.99, 0.99, 0.99, 0.99],     # all ends: still one position
                          [0.01, 0.9, 0.02, 0.9, 0.9]])       # an unsure end inside content is not the end
    assert end_split(p_end).tolist() == [2, 5, 1, 3]


def test_end_split_ties_go_to_the_longer_span():
    assert end_split(torch.tensor([[0.01, 0.5, 0.5]])).tolist() == [3]


def test_the_most_confident_length_wins_and_positions_past_a_length_do_not_count():
    lengths = candidate_lengths(16)
    assert lengths == [4, 8, 16]
    confidence = torch.full((3, 16), 0.2)
    confidence[1, :8] = 0.9                 # the 8-token layout is sure of all its positions
    confidence[0, 4:] = 1.0                 # past the 4-token layout's end: ignored
    scores = length_scores(confidence, lengths)
    assert choose_length(scores) == 1
    assert torch.allclose(scores[0], torch.log(torch.tensor(0.2)))


def test_equal_confidence_picks_the_shorter_length():
    assert choose_length(length_scores(torch.full((3, 16), 0.5), [4, 8, 16])) == 0


def test_expand_turns_one_mask_into_two_and_delete_removes_its_position():
    tokens = torch.tensor([MASK, MASK, MASK, MASK])
    masked = torch.ones(4, dtype=torch.bool)
    commit = torch.tensor([True, True, True, False])
    proposal = torch.tensor([7, EXPAND, DELETE, 9])
    new, still = expand_delete(tokens, masked, commit, proposal, MASK, EXPAND, DELETE, max_length=16)
    assert new.tolist() == [7, MASK, MASK, MASK]
    assert still.tolist() == [False, True, True, True]


def test_expand_at_the_maximum_length_keeps_one_mask():
    tokens = torch.tensor([MASK, 5])
    masked = torch.tensor([True, False])
    new, still = expand_delete(tokens, masked, torch.tensor([True, False]), torch.tensor([EXPAND, MASK]),
                               MASK, EXPAND, DELETE, max_length=2)
    assert new.tolist() == [MASK, 5] and still.tolist() == [True, False]


def test_uncommitted_positions_are_kept_as_they_were():
    tokens = torch.tensor([4, MASK])
    masked = torch.tensor([False, True])
    new, still = expand_delete(tokens, masked, torch.zeros(2, dtype=torch.bool), torch.tensor([DELETE, DELETE]),
                               MASK, EXPAND, DELETE, max_length=8)
    assert new.tolist() == [4, MASK] and still.tolist() == [False, True]
