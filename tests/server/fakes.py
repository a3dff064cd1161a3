"""An engine stand-in with the real Engine's interface: it answers from a script, takes `steps`
steps of `step_s` seconds each, and polls `request.cancelled` between steps like the real one.
With `error`, it raises that after its steps (a failure mid-denoising: a model bug, out of memory)."""
from __future__ import annotations

import threading
import time

from spanfill.engine import Budget, CancelledError, CompletionRequest, CompletionResult, Timings


class FakeEngine:
    def __init__(self, tokenizer, texts=("return a + b",), steps: int = 4, step_s: float = 0.0,
                 error: Exception | None = None):
        self.tokenizer = tokenizer
        self.error = error
        self.texts = list(texts)
        self.steps = steps
        self.step_s = step_s
        self.calls: list[CompletionRequest] = []
        self.stopped_at: list[int] = []          # step at which each cancelled call stopped
        self.running = threading.Event()
        self.budget = Budget.scaled(self.info["max_context_tokens"])

    @property
    def info(self) -> dict:
        return {"model": "fake", "device": "cpu", "dtype": "float32", "params": 0, "span_length": 16,
                "steps": self.steps, "max_context_tokens": 256, "max_positions": 2048, "int8_matmuls": False}

    @property
    def cache_stats(self) -> dict:
        return {"requests": len(self.calls), "reused_tokens": 0, "encoded_tokens": 0}

    def complete(self, req: CompletionRequest) -> CompletionResult:
        if req.cancelled is not None and req.cancelled():
            raise CancelledError("cancelled before it started")
        self.calls.append(req)
        self.running.set()
        t0 = time.perf_counter()
        try:
            for step in range(self.steps):
                if req.cancelled is not None and req.cancelled():
                    self.stopped_at.append(step)
                    return CompletionResult([""] * req.n, 10, 0, 10, step, [False] * req.n, cancelled=True)
                time.sleep(self.step_s)
        finally:
            self.running.clear()
        if self.error is not None:
            raise self.error
        texts = (self.texts * req.n)[:req.n]
        ms = (time.perf_counter() - t0) * 1e3     # all of it "decoding"
        return CompletionResult(texts, 10, 5, 5, self.steps, [True] * req.n, timings=Timings(denoise_ms=ms, total_ms=ms))
