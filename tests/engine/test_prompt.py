"""Context windows (prompt.py)."""
from spanfill.engine.decoding.prompt import context_ids


def test_line_count_memo_gives_the_windows_a_fresh_tokenizer_gives(tiny_tok, tiny_dir):
    """prompt.py remembers tokens per line between requests; windows must not depend on it."""
    from spanfill.engine.decoding.prompt import Budget
    from spanfill.engine.testing import SAMPLE_CODE
    from spanfill.engine.core.tokenizer import Tokenizer
    budget = Budget(prefix_tokens=40, suffix_tokens=20, snippet_tokens=0)
    for cut in range(20, len(SAMPLE_CODE), 37):
        warm = context_ids(tiny_tok, SAMPLE_CODE[:cut], SAMPLE_CODE[cut:], budget=budget)
        fresh = Tokenizer.from_file(tiny_dir / "tokenizer.json")
        assert context_ids(fresh, SAMPLE_CODE[:cut], SAMPLE_CODE[cut:], budget=budget) == warm
    assert tiny_tok.line_counts      # the memo was used
