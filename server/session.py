"""Per-connection state: settings, open documents, the scheduler (and its engine), the
typing-through cache, the context builder and statistics. Plain Python, no pygls, so the
completion pipeline can be driven without a client."""
from __future__ import annotations

import weakref
from typing import Callable

from spanfill.engine import Budget, Engine

from .cache import TypingCache
from .context import ContextBuilder
from .documents import DocumentStore
from .scheduler import Scheduler
from .settings import Settings, as_client_dict
from .stats import Stats, rss_mb


class Session:
    def __init__(self, settings: Settings = Settings()):
        self.settings = settings
        self.defaults = settings     # the command line's (serve.py): what an unset model/device/threads means
        self.documents = DocumentStore()
        self.scheduler = Scheduler()
        self.cache = TypingCache()
        self.stats = Stats()
        self.on_notice: Callable[[str], None] | None = None   # tells the user (the server shows it)
        self._builder: tuple[weakref.ref, tuple, ContextBuilder] | None = None   # (engine, settings, it)
        self._told_cut: tuple[int, int] | None = None          # (asked, used) of the last cut told
        self.lost: set[str] = set()    # open documents forgotten (a change could not be read), the user told

    def context_tokens(self, engine: Engine) -> int | None:
        """`max_context_tokens`, cut to what `engine` holds beside the span (the engine refuses a
        longer context, so a larger setting would answer nothing); None = the model's own budget.
        A cut is told once, and again when a model or setting changes it."""
        asked = self.settings.max_context_tokens
        if asked is None:
            return None
        info = engine.info
        span = self.settings.span_length or info["span_length"]
        room = info["max_positions"] - span
        if asked <= room:
            self._told_cut = None
            return asked
        if self._told_cut != (asked, room):
            self._told_cut = asked, room
            if self.on_notice is not None:
                self.on_notice(f"spanfill: maxContextTokens={asked} is more than {info['model']} can take: "
                               f"{info['max_positions']} positions, {span} of them for the span; using "
                               f"{room}. Set maxContextTokens to {room} or less, or null for the model's budget")
        return room

    def context_builder(self, engine: Engine) -> ContextBuilder:
        """One builder per (engine, budget settings), so window hysteresis survives between requests.
        The engine is held weakly and compared by identity (a freed engine's id() can be a new one's)."""
        s = self.settings
        key = (s.max_context_tokens, s.span_length, s.snippet_files)
        if self._builder is None or self._builder[0]() is not engine or self._builder[1] != key:
            total = self.context_tokens(engine)
            if total is None:      # the model's budget, cut where a longer span than its own leaves less room
                info = engine.info
                room = info["max_positions"] - (s.span_length or info["span_length"])
                mine = engine.budget.within(room)
            else:
                mine = Budget.scaled(total)
            self._builder = weakref.ref(engine), key, ContextBuilder(
                engine.tokenizer, mine.prefix_tokens, mine.suffix_tokens, mine.snippet_tokens, s.snippet_files)
        return self._builder[2]

    def forget(self, uri: str) -> None:
        self.scheduler.cancel(uri)
        self.documents.close(uri)
        self.cache.forget(uri)
        if self._builder is not None:
            self._builder[2].forget(uri)

    def status(self) -> dict:
        engine = self.scheduler.engine
        info = engine.info if engine else {}
        return {
            "state": self.scheduler.state,
            "error": self.scheduler.error,
            "model": info.get("model"),
            "family": info.get("family", "spanfill") if engine else None,   # public checkpoints: engine/families
            "device": info.get("device"),
            "dtype": info.get("dtype"),
            "int8Matmuls": info.get("int8_matmuls"),   # fp32 model, most matmuls int8 (quantize.py)
            "threads": info.get("threads"),
            "params": info.get("params"),
            "compiled": info.get("compiled"),
            "compile": info.get("compile"),        # off | compiling | ready | failed
            "compiledFallbacks": info.get("compiled_fallbacks"),   # per step: calls that ran eagerly
            **self.stats.snapshot(),
            "engineCache": engine.cache_stats if engine else None,
            "engineFailures": self.scheduler.failures,          # engines that raised and were reloaded
            "resources": {"rssMb": rss_mb(), "openDocuments": len(self.documents),
                          "typingCache": len(self.cache),
                          "contextWindows": len(self._builder[2]) if self._builder else 0},
            "settings": as_client_dict(self.settings),
        }
