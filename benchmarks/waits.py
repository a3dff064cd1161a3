"""What a user waits for while typing, counted from the requests benchmarks/replay.py sent: each
keystroke's *keystroke to suggestion*, the figures of the replay's result file, and the latency goals
judged on them. replay.py measures, soak.py summarises its round trips here, and report.py reads the
figures back and judges the goals with the same function.

A keystroke waits from its request being sent to the first answer the editor shows for it or for a
later keystroke of the same function body. An answer is shown when it reaches the client before the
next keystroke; one that comes later answers a text already changed, so the editor drops it (its
request was cancelled). A keystroke whose request was cancelled therefore waits on until a later
keystroke's answer arrives, and the last keystroke of a body (the user stops typing) waits for its
own answer, however long it takes. An empty answer counts as shown: the server has answered for that
text and the editor shows no ghost text. A keystroke after which no answer is shown before the body
ends has an endless wait (inf): it ranks above every finite one, so a percentile that falls on it is
null rather than a figure that flatters the tail. The editor's own carrying of a suggestion while the
user types through it is not credited: the wait runs to the server's answer.
"""
from __future__ import annotations

import math
import statistics

GOALS_MS = {"p50": 30, "p95": 60}     # keystroke to suggestion


def answers_shown(requests: list) -> list:
    """For each keystroke (replay.Request records in the order they were sent), the request whose
    answer ended its wait: its own where that was shown, else the first later one of the same body
    that was; None where none was."""
    out = []
    ends, region = None, None
    for req in reversed(requests):
        if req.region != region:
            ends, region = None, req.region
        if req.shown:
            ends = req
        out.append(ends)
    return out[::-1]


def keystroke_waits_ms(requests: list) -> list[float]:
    """Keystroke to suggestion per keystroke, in ms; inf where no answer was shown after it."""
    return [(end.received - req.sent) * 1e3 if end else math.inf
            for req, end in zip(requests, answers_shown(requests))]


def ms_summary(values: list[float]) -> dict:
    """count, p50/p95/p99, mean and max, in ms; an endless wait (inf) ranks above every other, and a
    figure it decides is null."""
    from common import percentile   # here, not on top: common brings torch, which report.py does without

    if not values:
        return {"count": 0}
    figure = lambda v: round(v, 2) if math.isfinite(v) else None   # noqa: E731
    return {"count": len(values), **{f"p{q}": figure(percentile(values, q)) for q in (50, 95, 99)},
            "mean": figure(statistics.fmean(values)), "max": figure(max(values))}


def goals_met(wait: dict, goals: dict = GOALS_MS) -> bool:
    """Whether a keystroke-to-suggestion summary is under every goal; a never-answered percentile is not."""
    return all(wait.get(q) is not None and wait[q] < goal for q, goal in goals.items())


def recorded_waits(result: dict) -> dict | None:
    """A replay result file's keystroke-to-suggestion summary. A file without one has the round trips
    of answered requests alone: where no keystroke was cancelled or left unanswered, each keystroke's
    wait is its own round trip, so those are the figures; otherwise they are unknown (None)."""
    if "keystroke_to_suggestion_ms" in result:
        return result["keystroke_to_suggestion_ms"]
    req = result["requests"]
    return result["latency_ms"] if req["cancelled"] == req["failed"] == 0 else None


def account(run) -> dict:
    """The figures of a replay.Replay's result file, from its requests to the samples behind them."""
    sent = run.requests
    cancelled = [r for r in sent if r.cancelled]
    answered = [r for r in sent if r.shown]
    failed = [r for r in sent if not r.cancelled and r.text is None]
    ms = {r.key: (r.received - r.sent) * 1e3 for r in answered}
    by_source = {s: ms_summary([ms[r.key] for r in answered if r.source == s]) for s in ("cache", "engine")}
    ends = answers_shown(sent)
    waits = keystroke_waits_ms(sent)
    ended_by = ["never" if end is None else end.source if end is req else "later" for req, end in zip(sent, ends)]
    wait = ms_summary(waits)
    cache_answers = sum(r.source == "cache" for r in answered)
    return {
        "requests": {"sent": len(sent), "answered": len(answered), "cancelled": len(cancelled),
                     "failed": len(failed), "answered_empty": sum(r.text == "" for r in answered),
                     "cancelled_but_answered": sum(r.text is not None for r in cancelled)},
        "keystroke_to_suggestion_ms": wait,
        "keystrokes": {"count": len(sent), "answered_before_next_key": len(answered),
                       "share_unanswered_before_next_key": round(1 - len(answered) / len(sent), 4) if sent else None,
                       "waited_for_a_later_key": ended_by.count("later"), "never_shown": ended_by.count("never"),
                       "ended_on_an_empty_answer": sum(end is not None and end.text == "" for end in ends)},
        "latency_ms": ms_summary(list(ms.values())),      # round trips of the answered requests alone
        "latency_ms_by_source": by_source,
        "typing_through": {"answered_from_cache": cache_answers,
                           "share_answered_from_cache": round(cache_answers / len(answered), 4) if answered else None,
                           "next_key_matches": run.next_key_matches, "whole_suggestion_correct": run.whole_correct,
                           "suggestions": sum(bool(r.text) for r in answered)},
        "key_lag_ms": ms_summary(run.key_lag_ms),
        "goals_ms": GOALS_MS,
        "goals_judged_on": "keystroke_to_suggestion_ms",
        "goals_met": goals_met(wait),
        "wait_samples_ms": [round(v, 3) if math.isfinite(v) else None for v in waits],
        "wait_ended_by": ended_by,        # the keystroke's own answer (cache, engine), a later one's, never
        "latency_samples_ms": [round(v, 3) for v in ms.values()],
        "sources": [r.source for r in answered],
    }
