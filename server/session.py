"""Per-connection state: settings, open documents, the scheduler (and its engine), the
typing-through cache, the context builder and statistics. Plain Python, no pygls, so the
completion pipeline can be driven without a client."""
from __future__ import annotations

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
        self.documents = DocumentStore()
        self.scheduler = Scheduler()
        self.cache = TypingCache()
        self.stats = Stats()
        self._builder: tuple[tuple, ContextBuilder] | None = None

    def context_builder(self, engine: Engine) -> ContextBuilder:
        """One builder per (engine, budget settings), so window hysteresis survives between requests."""
        key = (id(engine), self.settings.max_context_tokens, self.settings.snippet_files)
        if self._builder is None or self._builder[0] != key:
            total = self.settings.max_context_tokens
            mine = Budget.scaled(total) if total else engine.budget
            snippet_tokens = engine.budget.snippet_tokens   # the engine cuts snippets to this
            self._builder = key, ContextBuilder(engine.tokenizer, mine.prefix_tokens, mine.suffix_tokens,
                                                snippet_tokens, self.settings.snippet_files)
        return self._builder[1]

    def forget(self, uri: str) -> None:
        self.documents.close(uri)
        self.cache.forget(uri)
        if self._builder is not None:
            self._builder[1].forget(uri)

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
                          "contextWindows": len(self._builder[1]) if self._builder else 0},
            "settings": as_client_dict(self.settings),
        }
