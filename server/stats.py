"""Session statistics behind `spanfill/status`: latency percentiles, typing-through cache hit
rate, context-token reuse, superseded/cancelled requests, accepted/rejected suggestions."""
from __future__ import annotations

import itertools
import os
from collections import OrderedDict, deque
from dataclasses import dataclass, field

from spanfill.engine import percentile

WINDOW = 1000            # latencies kept for percentiles
ISSUED = 4096            # suggestion ids remembered for accept/reject feedback


def percentiles(samples: list[float], qs: tuple[int, ...] = (50, 90, 95, 99)) -> dict[str, float]:
    """Nearest-rank percentiles (the benchmarks' definition), rounded to 0.1 ms; empty when there are no samples."""
    if not samples:
        return {}
    return {f"p{q}": round(percentile(samples, q), 1) for q in qs}


def rss_mb() -> float | None:
    """This process's resident memory in MB (Linux's /proc; None where there is none)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def _summary(samples: deque) -> dict:
    out: dict = {"count": len(samples)}
    if samples:
        out["last"] = round(samples[-1], 1)
    return {**out, **percentiles(list(samples))}


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass
class Stats:
    requests: int = 0             # completion requests received
    cache_hits: int = 0           # answered by the typing-through cache
    engine_calls: int = 0         # requests that reached Engine.complete
    superseded: int = 0           # dropped because a newer request for the document arrived
    cancelled: int = 0            # dropped on $/cancelRequest
    errors: int = 0
    context_tokens: int = 0       # over all engine calls
    reused_tokens: int = 0        # context tokens served from the engine's KV cache
    accepted: int = 0
    rejected: int = 0
    latency_ms: deque = field(default_factory=lambda: deque(maxlen=WINDOW))     # answered requests
    engine_ms: deque = field(default_factory=lambda: deque(maxlen=WINDOW))      # Engine.complete only
    stage_ms: dict = field(default_factory=dict)  # where an engine-answered request's time went, per stage
    _issued: OrderedDict = field(default_factory=OrderedDict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def issue_id(self) -> str:
        """An id for one shown suggestion; the client echoes it when the user accepts or rejects it."""
        sid = f"s{next(self._ids)}"
        self._issued[sid] = None
        if len(self._issued) > ISSUED:
            self._issued.popitem(last=False)
        return sid

    def feedback(self, sid: str | None, accepted: bool) -> bool:
        """Count a verdict. An id counts once; False for an id this session never issued (or
        already counted). Clients that do not echo ids may send none: counted, not deduplicated."""
        if sid is not None:
            if sid not in self._issued:
                return False
            del self._issued[sid]
        if accepted:
            self.accepted += 1
        else:
            self.rejected += 1
        return True

    def record_engine(self, context_tokens: int, reused_tokens: int, total_ms: float,
                      stages: dict[str, float] | None = None, answered: bool = True) -> None:
        """stages: milliseconds per named stage of this call (the context windows, tokenizing, the
        context prefill, decoding; the AR check and fallback where they ran), so `spanfill/status`
        can say where engine time goes. A call stopped between its steps (answered=False: the next
        keystroke took over) counts as a call but not in the latencies: it ran part of one."""
        self.engine_calls += 1
        self.context_tokens += context_tokens
        self.reused_tokens += reused_tokens
        if not answered:
            return
        self.engine_ms.append(total_ms)
        for name, ms in (stages or {}).items():
            self.stage_ms.setdefault(name, deque(maxlen=WINDOW)).append(ms)

    def snapshot(self) -> dict:
        """The statistics part of `spanfill/status` (camelCase, like the rest of LSP)."""
        return {
            "requests": self.requests,
            "cacheHits": self.cache_hits,
            "cacheHitRate": _rate(self.cache_hits, self.cache_hits + self.engine_calls),
            "engineCalls": self.engine_calls,
            "superseded": self.superseded,
            "cancelled": self.cancelled,
            "errors": self.errors,
            "contextReuseRate": _rate(self.reused_tokens, self.context_tokens),
            "latencyMs": _summary(self.latency_ms),
            "engineMs": _summary(self.engine_ms),
            "engineStagesMs": {name: _summary(ms) for name, ms in self.stage_ms.items()},
            "accepted": self.accepted,
            "rejected": self.rejected,
            "acceptanceRate": _rate(self.accepted, self.accepted + self.rejected),
        }
