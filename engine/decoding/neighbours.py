"""No token twice in a row: the span step's picks, made apart from their neighbours.

A masked-diffusion step predicts every span position from the context and the span as committed so
far, each position on its own. Two neighbouring positions that are both still masked are therefore
often given the same token — each is likely where it stands, the pair is not (`self.pathpath_names`,
`((self,,,`) — and a position next to a committed token often proposes that token again. Real code
almost never holds the same non-blank token twice in a row under a BPE tokenizer (common repeats
such as `))` or `__` are tokens of their own), so the step treats a repeat as an error to avoid:

* a masked position may not propose the token committed right before or right after it;
* where two neighbouring masked positions propose the same token, the less confident one takes its
  next choice (the pick run once more without its own and its neighbours' first choices); a pair
  that still repeats is committed last, once one of it is committed and its token banned beside it.
  Only a step that must commit everything (the last) can leave a repeat.

Blank tokens (indentation, line ends), runs of one character (`))`, `====`) and the control tokens
(a span's tail is pads) may repeat.
A ban is a large finite penalty, not -inf: where every other token is already banned (token healing
leaves one, say), the banned token stays the pick, and no distribution is ever empty (a sample from
one fails). Everything is batched and branch-free, so the step still compiles and graph-captures;
the second pick costs one more pass over the span's logits.
"""
from __future__ import annotations

from typing import Callable

import torch

PENALTY = 1e4     # subtracted from a banned token's logit: below any real logit, and still finite


def repeatable_tokens(vocab_size: int, token_bytes: Callable[[int], bytes], special_ids,
                      device: torch.device | None = None) -> torch.Tensor:
    """[V] bool: the tokens that may stand twice in a row: blank ones, runs of one character (`))`,
    `====`: closing brackets and comment rules continue in them) and the control tokens."""
    def repeatable(data: bytes) -> bool:
        return not data.strip() or (len(data) > 1 and len(set(data)) == 1)
    out = torch.tensor([repeatable(token_bytes(i)) for i in range(vocab_size)], dtype=torch.bool, device=device)
    out[list(special_ids)] = True
    return out


def ban_committed_neighbours(logits: torch.Tensor, span: torch.Tensor, masked: torch.Tensor,
                             repeatable: torch.Tensor) -> None:
    """logits [B, L, V], in place: at each masked position, the non-repeatable tokens committed at its
    left and right neighbours are banned."""
    text = ~repeatable[span]
    _ban_beside(logits, span, masked[:, 1:] & ~masked[:, :-1] & text[:, :-1],
                masked[:, :-1] & ~masked[:, 1:] & text[:, 1:])


def _ban_beside(logits: torch.Tensor, tokens: torch.Tensor, from_left: torch.Tensor, from_right: torch.Tensor) -> None:
    """logits [B, L, V], in place: position j loses tokens[j-1] where from_left[:, j-1] and tokens[j+1]
    where from_right[:, j] ([B, L-1] each). A scatter of PENALTY or 0: no shape depends on the data."""
    B, L, _ = logits.shape
    ban = torch.zeros((B, L, 2), dtype=torch.long, device=tokens.device)
    penalty = torch.zeros((B, L, 2), dtype=logits.dtype, device=tokens.device)
    ban[:, 1:, 0], ban[:, :-1, 1] = tokens[:, :-1], tokens[:, 1:]
    penalty[:, 1:, 0] = torch.where(from_left, -PENALTY, 0.0)
    penalty[:, :-1, 1] = torch.where(from_right, -PENALTY, 0.0)
    logits.scatter_add_(2, ban, penalty)


def twins(token: torch.Tensor, confidence: torch.Tensor, masked: torch.Tensor,
          repeatable: torch.Tensor) -> torch.Tensor:
    """[B, L] bool: of each pair of neighbouring masked positions that propose the same
    non-repeatable token, the less confident one (the left one on a tie)."""
    same = masked[:, :-1] & masked[:, 1:] & (token[:, :-1] == token[:, 1:]) & ~repeatable[token[:, :-1]]
    left_loses = confidence[:, :-1] <= confidence[:, 1:]
    loser = torch.zeros_like(masked)
    loser[:, :-1] |= same & left_loses
    loser[:, 1:] |= same & ~left_loses
    return loser


def pick_apart(logits: torch.Tensor, span: torch.Tensor, masked: torch.Tensor, repeatable: torch.Tensor,
               pick: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    """(confidence [B, L], token [B, L]) for the span's logits [B, L, V] (changed in place): `pick`
    (logits [M, V] -> (confidence [M], token [M])) with no token twice in a row, as far as one step
    can see: a pair that still repeats after the next choices (two of them agree, or a position has no
    other choice) gets a confidence below any other, so that it is committed last — after its
    neighbour, whose token is then banned — and only a final step commits such a pair as it is."""
    B, L, _ = logits.shape
    ban_committed_neighbours(logits, span, masked, repeatable)
    conf, token = pick(logits.flatten(0, 1))
    conf, token = conf.view(B, L).float(), token.view(B, L)
    # each position's next choice: without its first choice and its masked neighbours' first choices
    # (where nothing else is left, that first choice again)
    logits.scatter_add_(2, token[..., None], logits.new_full((B, L, 1), -PENALTY))
    text = masked & ~repeatable[token]
    _ban_beside(logits, token, masked[:, 1:] & text[:, :-1], masked[:, :-1] & text[:, 1:])
    conf2, token2 = pick(logits.flatten(0, 1))
    token2 = token2.view(B, L)
    # scaled to the whole vocabulary (for a greedy or full-distribution pick, its probability)
    conf2 = conf2.view(B, L).float() * (1 - conf)
    loser = twins(token, conf, masked, repeatable) & (token2 != token)
    conf, token = torch.where(loser, conf2, conf), torch.where(loser, token2, token)
    return torch.where(twins(token, conf, masked, repeatable), conf - 2, conf), token
