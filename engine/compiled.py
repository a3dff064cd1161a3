"""Compiled CPU steps: the two per-step hot paths through `torch.compile` (Inductor), weights frozen.

On a 2-core CPU one span step of the default model is ~150 small eager ops (norms, RoPE, residuals,
SwiGLU, cache writes) around 24 matmuls, and their dispatch costs more than the arithmetic; Inductor
fuses the pointwise work into a few C++ loops and, with `freezing`, pre-packs the weights for oneDNN.
What is compiled is the *step* (gpt-fast's recipe), not the loop around it:

* `span_step(span, context_len, kv, bias, first_bias) -> (confidence, token)`: one greedy denoising
  pass of one candidate — the span's forward against the cached context, logits for every position,
  banned ids and token healing as additive biases, then max-probability and argmax;
* `token_step(token, position, kv) -> logits`: one AR token through the causal path.

Both specialise on the span length and batch and are dynamic in the context length and the cache's
capacity: `warm` calls each with two different lengths and capacities, so Dynamo compiles the
specialised graph and then the dynamic one, and no user request pays for a compile. It runs in a
background thread while requests use the eager path; `ready` flips when both are compiled. Any
failure (no C++ compiler, an unsupported op) leaves `ready` false and the engine eager.
"""
from __future__ import annotations

import logging
import threading
import time

import torch

from .model import SpanfillModel

log = logging.getLogger(__name__)


class CompiledSteps:
    def __init__(self, model: SpanfillModel, span_length: int):
        self.model = model
        self.span_length = span_length
        self.ready = False
        self.error: str | None = None
        self.compile_seconds: float | None = None
        self._done = threading.Event()
        self._span = torch.compile(self._span_step)
        self._token = torch.compile(self._token_step)

    # ---- the compiled functions ----------------------------------------------------------------
    def _span_step(self, span, context_len: int, kv, bias, first_bias):
        logits = self.model.logits(self.model.span_step(span, context_len, kv)).float() + bias   # [1, L, V]
        logits[:, 0] += first_bias
        top, token = logits.max(dim=-1)
        return torch.exp(top - torch.logsumexp(logits, dim=-1)), token

    def _token_step(self, token, position: int, kv):
        return self.model.logits(self.model.encode_context(token, position, kv))

    # ---- use -----------------------------------------------------------------------------------
    def supports(self, n: int, span_length: int, temperature: float) -> bool:
        return self.ready and n == 1 and span_length == self.span_length and temperature <= 0

    def span_step(self, span, context_len, kv, bias, first_bias):
        return self._span(span, context_len, kv, bias, first_bias)

    def token_step(self, token, position, kv):
        return self._token(token, position, kv)

    @property
    def state(self) -> str:
        if not self._done.is_set():
            return "compiling"
        return "ready" if self.ready else "failed"

    def wait(self, timeout: float | None = None) -> bool:
        self._done.wait(timeout)
        return self.ready

    # ---- compiling -----------------------------------------------------------------------------
    def warm(self) -> None:
        """Compile both steps on scratch caches of two sizes (never a request's cache)."""
        cfg = self.model.cfg
        w = self.model.embed.weight
        L, V = self.span_length, cfg.vocab_size
        t0 = time.perf_counter()
        try:
            with torch.inference_mode(), torch._inductor.config.patch(freezing=True):
                zeros = torch.zeros(V, device=w.device)
                for context_len, capacity in ((100, 256), (150, 384)):
                    shape = (1, cfg.n_heads, capacity, cfg.head_dim)
                    kv = [(torch.zeros(shape, dtype=w.dtype, device=w.device),
                           torch.zeros(shape, dtype=w.dtype, device=w.device)) for _ in range(cfg.n_layers)]
                    span = torch.ones(1, L, dtype=torch.long, device=w.device)
                    self._span(span, context_len, kv, zeros, zeros)
                    self._token(span[:, :1], context_len, kv)
        except Exception as err:   # noqa: BLE001 - any compiler failure means: stay eager
            self.error = f"{type(err).__name__}: {err}"
            log.warning("compiling the CPU steps failed, staying eager: %s", self.error)
        else:
            self.compile_seconds = time.perf_counter() - t0
            self.ready = True
            log.info("compiled CPU steps in %.1f s", self.compile_seconds)
        finally:
            self._done.set()

    def start(self) -> "CompiledSteps":
        threading.Thread(target=self.warm, name="spanfill-compile", daemon=True).start()
        return self
