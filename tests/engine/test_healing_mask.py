"""Token healing's first-token mask (healing.py), found by bisection in the vocabulary sorted by
bytes: the same mask as testing every token's bytes against the stub, for healable tokens of the
shipped tokenizer and for stubs that are no token."""
import pytest
import torch

from spanfill.engine.core.tokenizer import Tokenizer
from spanfill.engine.decoding.healing import HEALABLE, Healer


@pytest.fixture(scope="module")
def tok(shipped_model) -> Tokenizer:
    return Tokenizer.from_file(shipped_model / "tokenizer.json")


def scanned(tok: Tokenizer, stub: bytes) -> torch.Tensor:
    """[V] bool: the tokens whose bytes start with `stub`, by testing every one."""
    return torch.tensor([tok.token_bytes(i).startswith(stub) for i in range(tok.vocab_size)])


def test_the_mask_is_the_scanned_one_for_healable_tokens(tok):
    healer, sp = Healer(tok), tok.special
    healable = [i for i in range(tok.vocab_size) if HEALABLE.match(tok.token_bytes(i))]
    assert len(healable) > tok.vocab_size // 2
    for tid in healable[::40]:
        healed = healer.heal([sp.prefix, tid, sp.middle])
        allowed = scanned(tok, tok.token_bytes(tid))
        assert healed.stub == tok.token_bytes(tid) and allowed[tid]
        assert torch.equal(healed.first_bias, torch.zeros(tok.vocab_size).masked_fill_(~allowed, float("-inf")))


@pytest.mark.parametrize("stub", [b"zzzzqqq", b"\xff\xfe", b" self.assertEq", b"\xe6\x97", b"~", b" ", b"\x00"])
def test_stubs_that_are_no_token(tok, stub):
    allowed = torch.zeros(tok.vocab_size, dtype=torch.bool).index_fill_(0, Healer(tok).extending(stub), True)
    assert torch.equal(allowed, scanned(tok, stub))
