"""Compiled CPU steps: the per-step hot paths through `torch.compile` (Inductor), weights frozen.

On a 2-core CPU one span step of the default model is ~150 small eager ops (norms, RoPE, residuals,
SwiGLU, cache writes) around 25 matmuls, and their dispatch costs more than the arithmetic; Inductor
fuses the pointwise work into a few C++ loops, and with the weights frozen the matmuls of the span
and token steps and of one typed token's prefill become its C++ GEMM template (AMX micro-kernels on
pre-packed weights; see STEP_CONFIG).
What is compiled is the *step* (gpt-fast's recipe), not the loop around it:

* `denoise_step(span, masked, context_len, kv, bias, first_bias, repeatable, steps_left)`: denoise.step_body,
  the one step body, for greedy decoding of one candidate with the `content` commit rule, in place
  on span/masked (steps_left a tensor: the commit is a rank test, so every step shares one graph);
* `token_step(token, position, kv) -> logits`: one AR token through the causal path;
* `prefill(tokens, start, kv) -> hidden`: encoding new context tokens into the cache (all of a new
  file's context, or the few tokens typed since the last request), dynamic in their number; the
  same graphs serve `encode_every`, which returns every new token's hidden state (the AR check's
  pass over a diffusion draft, check.py).

The steps specialise on the span length and batch, and nothing else should need a recompile during
a request: the caches are passed as views that end where the step's keys end (so their length is
always context + L, one symbol), and steps_left is a tensor (the commit is a rank test). The 12
views cost some guard checks per call; one stacked [layers, 2, ...] cache tensor would guard once,
but Inductor does not write a functionalised view of one input in place and would copy the whole
cache at every layer, which costs far more. `warm`
compiles the span and token steps with the context length a symbol from the start
(DYNAMIC_FROM_THE_START; the prefill is dynamic throughout), calls each at a second context length
to check that graph takes it, and compiles the guard cases Dynamo splits off (a view that is a whole
buffer; a prefill from position 0; one typed token). Should a request still
need a recompile, that call runs the step's eager function instead: no request waits for a compiler.
Such calls are counted per step in `fallbacks` (the server's status reports them) and the first few
guard failures are logged, so a slow percentile that comes from eager steps shows up as such.
Warming up runs in a background thread while requests use the eager path; `ready` flips when every
step is compiled. Any failure (no C++ compiler, an unsupported op) leaves `ready` false and the
engine eager.
"""
from __future__ import annotations

import logging
import threading
import time
import types

import torch

from ..core.family import ModelFamily
from .denoise import step_body

log = logging.getLogger(__name__)
# Inductor settings while warming up. `freezing` makes the weights graph constants, so the matmuls
# use pre-packed weights; it must be set in the global config: passed as torch.compile(options=) it
# is read too late and silently does nothing (the matmuls stay aten::mm). The span and token steps
# also autotune their matmuls between aten and Inductor's C++ GEMM template, which on AMX machines is
# much faster at these shapes (32 or 1 rows); so does the prefill of one typed token (a graph of its
# own: Dynamo specialises a size of 1). The prefill's row count is otherwise dynamic, which the
# template does not take, so it keeps oneDNN's packed linear.
FREEZE = {"freezing": True}
MAX_LOGGED_FALLBACKS = 5     # guard failures logged in full; later ones are only counted
STEP_CONFIG = {**FREEZE, "max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN",
               # autotuning would print its timing tables to stderr, the server's log
               "autotune_num_choices_displayed": 0, "max_autotune_report_choices_stats": False}
# The span and token steps' context length (an int argument) and their cache views' length are
# symbols from the first graph on. Left to Dynamo, the first call compiles a graph specialised to its
# context length, which no request would use, and only the second the dynamic one.
DYNAMIC_FROM_THE_START = r"L\['context_len'\],L\['position'\],L\['kv'\].*:2"


def forget_autotune_timings() -> bool:
    """Remove the autotune timings an earlier process left in Inductor's cache directory, so that
    this warm-up times its own choices (and reuses them from then on). False where the file cannot
    be found or removed (a changed Inductor internal): then nothing may be reused, not even in-process."""
    try:
        from torch._inductor.codecache import PersistentCache
        PersistentCache.get_local_cache_path().unlink(missing_ok=True)
    except Exception as err:   # noqa: BLE001 - an internal API; without it, time every choice afresh
        log.info("could not clear Inductor's autotune timings (%s); timing every matmul afresh", err)
        return False
    return True


def own_code(method):
    """`method` bound to a copy of its function with a code object of its own. Dynamo keeps compiled
    graphs per code object, at most 8 (recompile_limit), so the steps of two engines in one process
    (a server that reloads its model after a settings change; a benchmark comparing two) would share
    one list: the second warm-up's prefill graphs (6 of them) would pass the limit, Dynamo would
    silently run those cases eagerly, and the first engine's graphs, frozen weights and all, would
    outlive it. With a code object per engine its graphs go when it goes."""
    fn = method.__func__
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    return types.MethodType(copy, method.__self__)


class CompiledSteps:
    def __init__(self, model: ModelFamily, span_length: int, eom_id: int, pad_id: int,
                 shrink_to: tuple[int, ...] = ()):
        self.model = model
        self.eom_id, self.pad_id = eom_id, pad_id
        self.span_length = span_length
        # the denoising step is compiled for the span and for the shorter lengths the loop cuts it
        # down to (Engine.shrink_to, length.SHRINK_TO by default): one static graph each, and one
        # more for views that are whole buffers. Past Dynamo's limit of graphs per function the
        # warm-up's last ones would silently stay eager
        self.span_lengths = (span_length, *shrink_to)
        limit = torch._dynamo.config.recompile_limit
        if len(self.span_lengths) + 1 > limit:
            raise ValueError(f"{len(shrink_to)} span lengths to cut to ({shrink_to}) need {len(self.span_lengths) + 1} "
                             f"compiled graphs, over Dynamo's recompile_limit of {limit}: cut to {limit - 2} lengths at most")
        self.ready = False
        self.error: str | None = None
        self.compile_seconds: float | None = None
        self._done = threading.Event()
        self._stop = threading.Event()   # the engine is out of service: the warm-up ends early
        self._denoise = torch.compile(own_code(self._denoise_step))
        self._token = torch.compile(own_code(self._token_step))
        self._prefill = torch.compile(own_code(self._encode_every), dynamic=True)
        self._left: dict[int, torch.Tensor] = {}
        self._warming = True          # while warming up: compile; afterwards: never
        self.strict = False           # benchmarks: a call that cannot use a compiled graph raises
        self.fallbacks = {"denoise": 0, "token": 0, "prefill": 0}   # calls that ran eagerly, per step

    # ---- the compiled functions ----------------------------------------------------------------
    def _denoise_step(self, span, masked, context_len: int, kv, bias, first_bias, repeatable, steps_left) -> None:
        step_body(self.model, span, masked, context_len, kv, steps_left, 0, bias, first_bias, "content", 0.0,
                  self.eom_id, self.pad_id, repeatable=repeatable)

    def _token_step(self, token, position: int, kv):
        return self.model.logits(self.model.encode_context(token, position, kv))

    def _encode_every(self, tokens, start: int, kv):
        return self.model.encode_context(tokens, start, kv, every=True)

    # ---- use -----------------------------------------------------------------------------------
    def supports(self, n: int, span_length: int, temperature: float, rule: str) -> bool:
        return self.ready and n == 1 and span_length in self.span_lengths and temperature <= 0 and rule == "content"

    def denoise_step(self, span, masked, context_len, kv, bias, first_bias, repeatable, steps_left: int) -> None:
        """In inference mode, with inference tensors (as the engine runs it): other tensors would
        not match the compiled graphs' guards and run eagerly. repeatable [V] bool: the tokens that
        may stand twice in a row (neighbours.py; all True: any may)."""
        end = context_len + span.shape[1]
        if self._warming:   # a graph per span length, never one with the length a symbol
            torch._dynamo.mark_static(span, 1)
            torch._dynamo.mark_static(masked, 1)
        if steps_left not in self._left:
            self._left[steps_left] = torch.tensor(steps_left, device=span.device)
        self._call("denoise", self._denoise, self._denoise_step,
                   span, masked, context_len, _upto(kv, end), bias, first_bias, repeatable, self._left[steps_left])

    def token_step(self, token, position, kv):
        return self._call("token", self._token, self._token_step, token, position, _upto(kv, position + 1))

    def prefill(self, tokens, start, kv):
        """The last new token's hidden state [1, D], as model.encode_context."""
        return self._encode(tokens, start, kv)[-1:]

    def encode_every(self, tokens, start, kv):
        """Every new token's hidden state [N, D], as model.encode_context(..., every=True)."""
        return self._encode(tokens, start, kv)

    def _encode(self, tokens, start, kv):
        return self._call("prefill", self._prefill, self._encode_every, tokens, start, _upto(kv, start + tokens.shape[1]))

    def _call(self, name: str, compiled, eager, *args):
        """The compiled step, or, where its graphs' guards reject the arguments, the eager function
        (counted; in strict mode the guard failure is raised instead)."""
        if self._warming:
            return compiled(*args)
        try:
            # raises before the step runs, so nothing was half written
            with torch.compiler.set_stance("fail_on_recompile"):
                return compiled(*args)
        except RuntimeError as err:
            if self.strict or "fail_on_recompile" not in str(err):
                raise
            self.fallbacks[name] += 1
            if sum(self.fallbacks.values()) <= MAX_LOGGED_FALLBACKS:
                log.warning("the compiled %s step ran eagerly: %s", name, err)
        return eager(*args)

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
        """Compile every step on scratch caches (never a request's cache)."""
        cfg = self.model.cfg
        w = self.model.embed.weight
        L, V = self.span_length, cfg.vocab_size
        t0 = time.perf_counter()
        # Inductor keeps autotune timings in a file and reuses them for a matmul of the same shapes:
        # within one warm-up that spares re-timing the same choices for every layer of every graph.
        # Across processes it would keep timings taken while the machine was busy (and pick slower
        # kernels by them), so the file an earlier process left goes first
        step_config = {**STEP_CONFIG, "autotune_local_cache": forget_autotune_timings()}
        try:
            with torch.inference_mode():
                # sizes and strides vary; the last case's views are whole buffers (contiguous),
                # which Dynamo guards as a case of its own
                for context_len, capacity in ((100, 256), (150, 384), (256 - L, 256)):
                    kv = self._scratch(capacity)
                    with torch._inductor.config.patch(step_config), \
                            torch.compiler.config.patch(dynamic_sources=DYNAMIC_FROM_THE_START):
                        for n in self.span_lengths:
                            self._stop_point()
                            # the shorter spans at the same context lengths, so their views end
                            # before the buffer's end: the contiguous case is the full span's
                            span = torch.ones(1, n, dtype=torch.long, device=w.device)
                            masked = torch.ones(1, n, dtype=torch.bool, device=w.device)
                            self.denoise_step(span, masked, context_len, kv, torch.zeros(V, device=w.device),
                                              torch.zeros(V, device=w.device),
                                              torch.zeros(V, dtype=torch.bool, device=w.device), 2)
                        position = capacity - 1 if context_len + L == capacity else context_len
                        self._stop_point()
                        self.token_step(torch.ones(1, 1, dtype=torch.long, device=w.device), position, kv)
                # a whole context from position 0, then a few typed tokens after it, and one typed
                # token (Dynamo specialises a size of 1: its own graph; a keystroke often adds one);
                # each again ending at the buffer's end
                for start, n, capacity in ((0, 90, 256), (0, 140, 384), (90, 3, 256), (140, 7, 384),
                                           (0, 256, 256), (250, 6, 256), (93, 1, 256), (147, 1, 384),
                                           (255, 1, 256)):
                    self._stop_point()
                    with torch._inductor.config.patch(step_config if n == 1 else FREEZE):
                        self.prefill(torch.ones(1, n, dtype=torch.long, device=w.device), start, self._scratch(capacity))
        except WarmupStopped:
            self.error = "stopped: the engine went out of service"
            log.info("compiling the CPU steps stopped: the engine went out of service")
        except Exception as err:   # noqa: BLE001 - any compiler failure means: stay eager
            self.error = f"{type(err).__name__}: {err}"
            log.warning("compiling the CPU steps failed, staying eager: %s", self.error)
        else:
            self.compile_seconds = time.perf_counter() - t0
            self._warming = False
            self.ready = True
            log.info("compiled CPU steps in %.1f s", self.compile_seconds)
        finally:
            self._done.set()

    def _stop_point(self) -> None:
        if self._stop.is_set():
            raise WarmupStopped

    def stop(self) -> None:
        """End the warm-up before its next graph (an engine out of service need not be compiled)."""
        self._stop.set()

    def _scratch(self, capacity: int):
        return self.model.allocate_kv(capacity)

    def start(self) -> "CompiledSteps":
        threading.Thread(target=self.warm, name="spanfill-compile", daemon=True).start()
        return self


class WarmupStopped(Exception):
    """CompiledSteps.stop() was called during the warm-up."""


def _upto(kv, end: int):
    """Views of the per-layer caches that end at position `end`."""
    return [(k[:, :, :end], v[:, :, :end]) for k, v in kv]
