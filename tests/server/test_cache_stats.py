"""Typing-through cache and session statistics."""
from spanfill.server.cache import Suggestion, TypingCache
from spanfill.server.stats import Stats, percentiles

SOURCE = "def add(a, b):\n    \n\nprint(add(1, 2))\n"
CURSOR = SOURCE.index("\n\nprint")
URI = "file:///m.py"


def cache_with(*texts) -> TypingCache:
    cache = TypingCache()
    cache.store(URI, Suggestion(CURSOR, len(SOURCE) - CURSOR, SOURCE[:CURSOR], SOURCE[CURSOR:], texts))
    return cache


def typed(chars: str) -> tuple[str, int]:
    return SOURCE[:CURSOR] + chars + SOURCE[CURSOR:], CURSOR + len(chars)


def test_same_position_returns_the_suggestion():
    assert cache_with("return a + b").lookup(URI, SOURCE, CURSOR) == ["return a + b"]


def test_typing_the_start_of_a_suggestion_returns_the_rest():
    cache = cache_with("return a + b", "return b + a", "pass")
    assert cache.lookup(URI, *typed("return a")) == [" + b"]
    assert cache.lookup(URI, *typed("ret")) == ["urn a + b", "urn b + a"]


def test_typing_something_else_misses():
    assert cache_with("return a + b").lookup(URI, *typed("x")) is None


def test_typing_the_whole_suggestion_is_a_hit_with_nothing_left():
    assert cache_with("return a + b").lookup(URI, *typed("return a + b")) == []


def test_a_whole_suggestion_that_ends_on_a_block_opener_misses_so_the_body_is_asked_for():
    """After `for item in items:` is typed or accepted in full the engine is asked again (the body is
    next, as Copilot shows it); after a plain statement nothing is left, with no engine call."""
    assert cache_with("for i in range(a):").lookup(URI, *typed("for i in range(a):")) is None
    assert cache_with("total = {").lookup(URI, *typed("total = {")) is None
    assert cache_with("for i in range(a):").lookup(URI, *typed("for i in range")) == ["(a):"]
    crlf = SOURCE.replace("\n", "\r\n")
    at = crlf.index("\r\n\r\nprint")
    cache = TypingCache()
    cache.store(URI, Suggestion(at, len(crlf) - at, crlf[:at], crlf[at:], ("if a:",)))
    assert cache.lookup(URI, crlf[:at] + "if a:" + crlf[at:], at + 5) is None
    assert cache.lookup(URI, crlf[:at] + "if a" + crlf[at:], at + 4) == [":"]


def test_edits_elsewhere_or_backspace_miss():
    cache = cache_with("return a + b")
    text, offset = typed("ret")
    assert cache.lookup(URI, text.replace("print", "pprint"), offset) is None     # text after the cursor changed
    assert cache.lookup(URI, text.replace("def add", "def sum"), offset) is None  # prefix window changed
    assert cache.lookup(URI, SOURCE[:CURSOR - 1] + SOURCE[CURSOR:], CURSOR - 1) is None
    assert cache.lookup("file:///other.py", text, offset) is None


def test_percentiles_nearest_rank():
    samples = list(range(1, 101))
    assert percentiles(samples) == {"p50": 50, "p90": 90, "p95": 95, "p99": 99}
    assert percentiles([]) == {}


def test_snapshot_rates_and_feedback():
    stats = Stats()
    stats.cache_hits = 3
    stats.record_engine(context_tokens=100, reused_tokens=80, total_ms=12.0,
                        stages={"prefill": 2.0, "decode": 9.0})
    stats.record_engine(context_tokens=0, reused_tokens=0, total_ms=20.0, stages={"prefill": 4.0, "decode": 15.0})
    a, b = stats.issue_id(), stats.issue_id()
    assert stats.feedback(a, accepted=True)
    assert not stats.feedback(a, accepted=True)          # counted once
    assert not stats.feedback("s999", accepted=True)     # never issued
    assert stats.feedback(b, accepted=False)
    assert stats.feedback(None, accepted=True)           # clients that do not echo ids
    snap = stats.snapshot()
    assert snap["cacheHitRate"] == 0.6 and snap["contextReuseRate"] == 0.8
    assert (snap["accepted"], snap["rejected"], snap["acceptanceRate"]) == (2, 1, 0.6667)
    assert snap["engineMs"] == {"count": 2, "last": 20.0, "p50": 12.0, "p90": 20.0, "p95": 20.0, "p99": 20.0}
    stages = snap["engineStagesMs"]
    assert list(stages) == ["prefill", "decode"]
    assert (stages["prefill"]["p50"], stages["prefill"]["last"], stages["decode"]["p99"]) == (2.0, 4.0, 15.0)
