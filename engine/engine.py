"""`Engine`: the public face of spanfill.engine. Load a checkpoint once, then `complete` requests.

    engine = Engine.load()                        # the shipped default model, best device/dtype
    result = engine.complete(CompletionRequest(prefix="def add(a, b):\\n    return ", suffix="\\n"))

One thread should own an Engine (the server's worker does); a lock makes misuse safe, not fast.
Stages are timed separately: tokenize -> context (KV cache) -> denoise -> check -> detokenize.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
from pathlib import Path
from typing import Callable

import torch

from .api import CHECKED_STEPS, CompletionRequest, CompletionResult, Timings, begin, check_request
from .core.checkpoint import DEFAULT_MODEL_DIR, load_model
from .decoding.check import CheckOutput, check_draft, resolve_check
from .decoding.compiled import CompiledSteps
from .decoding.context_cache import ContextCache
from .decoding.cuda_step import StaticSpanDenoiser
from .decoding.denoise import LOOKUP_TOKENS, DenoiseConfig, ar_decode, banned_bias, denoise, passed
from .decoding.neighbours import repeatable_tokens
from .decoding.length import HEAD_QUANTILE, SHRINK_TO, head_end, resolve_length, shrink_lengths, start_span
from .decoding.postprocess import Cursor, leaves_block, to_lf, wants_multiline
from .core.device import pick_device, pick_dtype, set_threads, wants_int8
from .decoding.healing import Healer, Healing
from .core.model import SpanfillModel
from .decoding.prompt import Budget, context_ids, cut_windows
from .core.quantize import quantize_int8
from .core.tokenizer import Tokenizer



def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def compiles_by_default(device: torch.device) -> bool:
    """Whether `Engine.load(compile=None)` compiles the CPU steps: on CPU, unless SPANFILL_COMPILE=0."""
    return device.type == "cpu" and os.environ.get("SPANFILL_COMPILE", "1") != "0"


class Engine:
    def __init__(self, model: SpanfillModel, tokenizer: Tokenizer, name: str = "model", cache_entries: int = 4):
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        # intra-op threads as the loading thread (the one that runs requests) sees them, read now: in
        # the server, torch.get_num_threads() on the status handler's thread returned 2 while the
        # worker had set 1 (torch's count can be per thread once a thread has initialised it)
        self.threads = torch.get_num_threads()
        self.cache = ContextCache(model, cache_entries)
        self.healer = Healer(tokenizer, model.embed.weight.device, model.cfg.vocab_size)
        sp = tokenizer.special
        # the tokens a span step may pick twice in a row (neighbours.py); ids past the tokenizer's
        # (a model vocabulary padded beyond it) are never text, so they may
        with torch.inference_mode():   # an inference tensor, as the compiled steps' guards expect
            self.repeatable = repeatable_tokens(
                model.cfg.vocab_size, lambda i: tokenizer.token_bytes(i) if i < tokenizer.vocab_size else b"",
                dataclasses.astuple(sp), model.embed.weight.device)
        on_cuda = model.embed.weight.is_cuda     # on CUDA, greedy span steps replay captured graphs (cuda_step.py)
        self.static_denoiser = StaticSpanDenoiser(model, sp.mask, sp.eom, sp.pad) if on_cuda else None
        self.compiled: CompiledSteps | None = None      # CPU: set by `compile`, used once ready
        self._lock = threading.Lock()
        # what `complete` cuts windows to: the trained budget, or less where the positions beside the span hold less
        self.budget = Budget.scaled(min(model.cfg.max_context_tokens, model.cfg.max_positions - model.cfg.span_length))
        # tokens that end a line: at a single-line cursor AR stops after one (the editor shows one line)
        self.line_ends = frozenset(i for i in range(tokenizer.vocab_size) if b"\n" in tokenizer.token_bytes(i))
        # the quantile of the length head's count distribution a `head` span ends at (length.head_end);
        # benchmarks/head_quantile.py compares settings of it on one engine
        self.head_quantile = HEAD_QUANTILE
        # the lengths a span is cut down to once its tail is committed pads (length.SHRINK_TO); the
        # compiled steps hold a graph for each length this has when `compile` runs, and
        # benchmarks/span_lengths.py compares subsets of it on one engine
        self.shrink_to = SHRINK_TO
        # greedy AR's prompt-lookup proposals per pass (denoise.LOOKUP_TOKENS; 0: none); benchmarks/lookup.py
        # compares it on and off on one engine
        self.lookup_tokens = LOOKUP_TOKENS

    @classmethod
    def load(cls, path: str | Path | None = None, device: str = "auto", dtype: str = "auto",
             warmup: bool = True, compile: bool | None = None, wait: bool = False,
             threads: int | None = None) -> "Engine":
        """compile: compile the CPU steps in the background (compiled.py); None = on for CPU unless
        the environment sets SPANFILL_COMPILE=0. wait: return only once they are compiled (or failed).
        threads: intra-op CPU threads, set process-wide once the model has loaded (so a failed load
        leaves the engine still serving its threads) and before anything is compiled; None = leave
        torch's setting as it is."""
        from . import families     # a public diffusion checkpoint (Dream, CoDA, LLaDA, ...) has its own engine
        if families.handles(path):
            return families.load_engine(path, device=device, dtype=dtype, warmup=warmup, threads=threads)
        dev = pick_device(device)
        int8 = wants_int8(dev, dtype)   # an impossible int8 request fails before the model loads
        model, tok = load_model(path, device=dev, dtype=pick_dtype(dev, dtype))
        if int8:
            quantize_int8(model)
        if threads is not None:
            set_threads(threads)
        engine = cls(model, tok, name=str(Path(path) if path else DEFAULT_MODEL_DIR))
        if warmup:
            engine.warmup()
        if compile is None:
            compile = compiles_by_default(dev)
        if compile:
            engine.compile(wait=wait)
        return engine

    def compile(self, wait: bool = False) -> CompiledSteps:
        """Compile the greedy span step and the AR token step for the model's span length in a
        background thread; requests stay eager until it is done. wait=True blocks until then."""
        if self.compiled is None:
            sp = self.tokenizer.special
            L = self.model.cfg.span_length
            self.compiled = CompiledSteps(self.model, L, sp.eom, sp.pad, shrink_lengths(L, self.shrink_to)).start()
        if wait:
            self.compiled.wait()
        return self.compiled

    def retire(self) -> None:
        """The engine is out of service (another model serves): stop compiling its steps, which would
        go on taking the CPU for minutes."""
        if self.compiled is not None:
            self.compiled.stop()

    @property
    def info(self) -> dict:
        w = self.model.embed.weight
        cfg = self.model.cfg
        return {"model": self.name, "device": str(w.device), "dtype": str(w.dtype).replace("torch.", ""),
                "int8_matmuls": self.model.head is not None,
                "params": self.model.num_params(), "span_length": cfg.span_length, "steps": cfg.steps,
                "max_context_tokens": cfg.max_context_tokens, "max_positions": cfg.max_positions,
                "threads": self.threads,
                "compiled": bool(self.compiled and self.compiled.ready),
                "compile": self.compiled.state if self.compiled else "off",
                "compile_seconds": self.compiled.compile_seconds if self.compiled else None,
                # calls a compiled step's guards rejected, which ran eagerly (per step)
                "compiled_fallbacks": dict(self.compiled.fallbacks) if self.compiled else None}

    @property
    def cache_stats(self) -> dict:
        return self.cache.stats

    def warmup(self) -> None:
        """Run each path once so the first user request does not pay for lazy initialisation."""
        for mode in ("diffusion", "ar"):
            self.complete(CompletionRequest(prefix="def f(x):\n    return ", suffix="\n", mode=mode))
        self.cache.clear()
        self.cache.requests = self.cache.reused_tokens = self.cache.encoded_tokens = 0

    def complete(self, req: CompletionRequest) -> CompletionResult:
        with self._lock, torch.inference_mode():
            return self._complete(req)

    def _complete(self, req: CompletionRequest) -> CompletionResult:
        L, T = check_request(req, self.model.cfg.span_length, self.model.cfg.steps,
                             vocab_size=self.tokenizer.vocab_size)
        # the cursor's kind from its lines as LSP counts them (a caller's text may end lines with \r alone)
        cursor = Cursor(to_lf(req.prefix), to_lf(req.suffix))
        if req.mode == "diffusion" and req.span_length is None:
            L = start_span(L, cursor.before, cursor.after)
        multiline = wants_multiline(cursor)   # AR's line end, the fallback
        t_start, deadline = begin(req)
        timings = Timings()
        tok = self.tokenizer

        t0 = time.perf_counter()
        # a diffusion request's AR check or fallback decodes up to the whole span, past a shortened one
        room = L if req.mode == "ar" else max(L, req.span_length or self.model.cfg.span_length)
        limit = self.model.cfg.max_positions - room
        budget = self.budget.within(limit)     # less where a span longer than the model's leaves less
        if req.snippet_tokens is not None and req.snippet_tokens < budget.snippet_tokens:
            budget = dataclasses.replace(budget, snippet_tokens=req.snippet_tokens)
        # the windows, cut once: the model's context, and the text AR's block stop reads
        prefix, suffix = cut_windows(tok, req.prefix, req.suffix, budget) if req.cut else (req.prefix, req.suffix)
        window = Cursor(to_lf(prefix), to_lf(suffix))
        ids = context_ids(tok, prefix, suffix, req.snippets, budget, cut=False,
                          prefix_ids=req.prefix_ids, suffix_ids=req.suffix_ids)
        healing = self.healer.heal(ids) if req.heal else Healing(ids, b"", None)
        ids = healing.ids
        if len(ids) > limit:
            advice = "a shorter span_length" if req.cut else "cut=True or shorter windows"
            raise ValueError(f"context of {len(ids)} tokens plus a span of {room} exceeds the model's "
                             f"{self.model.cfg.max_positions} positions; pass {advice}")
        timings.tokenize_ms = _ms(t0)

        t0 = time.perf_counter()
        compiled = self.compiled if self.compiled is not None and self.compiled.ready and req.fast_steps else None
        length = resolve_length(req.length, cursor.before, cursor.after, self.model.length_head is not None)
        head = req.mode == "diffusion" and length == "head"
        if head and self.model.length_head is None:
            raise ValueError(f"length='head' needs a model with a length head; {self.name} has none "
                             f"(config.length_classes = 0): use length='pad'")
        accept = resolve_check(req.check, multiline) if req.mode == "diffusion" else None
        if accept is not None and req.steps is None:
            T = min(T, CHECKED_STEPS)
        # room for the model's whole span even when this request's is shorter: a shorter span's cache
        # views then never end at the buffer's end (a case the compiled steps warm up for the whole span only)
        lookup = self.cache.prepare(ids, room_after=max(L, self.model.cfg.span_length),
                                    need_hidden=req.mode == "ar" or head or accept is not None,
                                    encode=compiled.prefill if compiled else None)
        C = len(ids)
        timings.context_ms = _ms(t0)

        t0 = time.perf_counter()
        gen = None
        if req.temperature > 0:
            gen = torch.Generator(device=self.model.embed.weight.device)
            gen.manual_seed(req.seed if req.seed is not None else int(time.time_ns()) & 0xFFFFFFFF)
        temps = [0.0 if i == 0 and req.greedy_first else req.temperature for i in range(req.n)]
        if req.mode == "ar":
            rows, steps_run, deadline_hit, cancelled = self._ar(lookup.entry, C, L, temps, req, gen, deadline,
                                                                healing, compiled, multiline, window)
        else:
            rows, steps_run, deadline_hit, cancelled = self._diffusion(lookup.entry, C, L, T, length, req, gen, deadline,
                                                                       healing, compiled)
        timings.denoise_ms = _ms(t0)
        # a deadline that ran out during the last step cut nothing, but leaves no time for the AR check
        # or fallback: either would write a token or two and replace what diffusion wrote
        kept: list[int] = []
        check_passes = 0
        if accept is not None and not cancelled and (deadline_hit or passed(deadline)):
            deadline_hit = True          # the draft stands unchecked
        elif accept is not None and not cancelled:
            t0 = time.perf_counter()
            rows, kept, check_passes, deadline_hit, cancelled = self._check(lookup.entry, C, rows, accept, temps, req, gen,
                                                                            deadline, healing, compiled, multiline, window)
            timings.check_ms = _ms(t0)

        t0 = time.perf_counter()
        texts, finished = self._texts(rows, healing, cancelled)
        timings.detokenize_ms = _ms(t0)
        # nothing the caller would show (postprocess.Shown.would_show: at a multi-line cursor of a Python
        # document, too little of it): one greedy AR candidate of the same weights. Not where diffusion
        # wrote nothing at a single-line cursor (the model sees nothing to insert there: AR's time is
        # spared while typing); at a multi-line cursor (an empty line, a block opener) a body is wanted
        fell_back = (req.mode == "diffusion" and req.would_show is not None and not cancelled
                     and (any(text.strip() for text in texts) or multiline)
                     and not any(req.would_show(text) for text in texts))
        if fell_back and (deadline_hit or passed(deadline)):
            fell_back, deadline_hit = False, True          # diffusion's text stands
        if fell_back:
            t0 = time.perf_counter()
            L_ar = req.span_length or self.model.cfg.span_length
            entry = self.cache.prepare(ids, room_after=max(L_ar, self.model.cfg.span_length), need_hidden=True,
                                       encode=compiled.prefill if compiled else None).entry
            rows, ar_steps, deadline_hit, cancelled = self._ar(entry, C, L_ar, [0.0], req, None, deadline, healing,
                                                               compiled, multiline, window)
            steps_run += ar_steps
            ar_texts, ar_finished = self._texts(rows, healing, cancelled)
            if deadline_hit and not any(req.would_show(text) for text in ar_texts):
                fell_back = False   # AR's text, cut short, is no better: diffusion's (which may show in part) stands
            else:
                texts, finished = ar_texts, ar_finished
            timings.fallback_ms = _ms(t0)
        timings.total_ms = _ms(t_start)
        return CompletionResult(texts, C, lookup.reused, lookup.encoded, steps_run, finished,
                                deadline_hit, cancelled, timings, fell_back, [] if fell_back else kept, check_passes)

    def _diffusion(self, entry, C: int, L: int, T: int, length: str, req: CompletionRequest, gen, deadline,
                   healing: Healing, compiled) -> tuple[list[list[int]], int, bool, bool]:
        """The span denoised against the cached context, on the captured CUDA steps, the compiled CPU
        steps or the eager loop, whichever serves the request: (rows, steps run, deadline hit, cancelled)."""
        sp = self.tokenizer.special
        head = length == "head"
        # pad stays allowed: after <|eom|> the model was trained to predict it. Under `head` the end
        # and the pads after it are placed before the first step, so no position may propose either
        banned = [sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle] + ([sp.eom, sp.pad] if head else [])
        end = (head_end(torch.softmax(self.model.length_logits(entry.last_hidden)[0].float(), -1), self.head_quantile)
               if head else None)
        cut_to = shrink_lengths(L, self.shrink_to) if req.rule == "content" and req.shrink_span else ()
        cfg = DenoiseConfig(L, T, req.rule, req.threshold, req.temperature, req.top_p, banned, req.greedy_first,
                            healing.first_bias, shrink_to=cut_to,
                            length=length, end=end, repeatable=self.repeatable)
        # the compiled and captured steps run `pad` and `head` (whose end is placed before the steps) only
        length_on_fast_steps = length in ("pad", "head")
        static = self.static_denoiser if req.fast_steps else None
        if static is not None and static.supports(cfg) and length_on_fast_steps:
            out = static.denoise(entry.kv, C, req.n, cfg, deadline, req.cancelled)
        else:
            fast = bool(compiled and compiled.supports(req.n, L, req.temperature, req.rule) and length_on_fast_steps)
            out = denoise(self.model, entry.kv, C, req.n, cfg, sp.mask, sp.eom, sp.pad, gen, deadline,
                          req.cancelled, self._fused_step(compiled, cfg) if fast else None)
        return out.span.tolist(), out.steps_run, out.deadline_hit, out.cancelled

    def _fused_step(self, compiled: CompiledSteps, cfg: DenoiseConfig) -> Callable:
        """denoise's fused_step: the compiled span step with cfg's banned ids, healing bias and repeatable tokens."""
        bias = banned_bias(tuple(cfg.banned or ()), self.model.cfg.vocab_size, self.model.embed.weight.device)
        first = cfg.first_bias if cfg.first_bias is not None else torch.zeros_like(bias)
        repeatable = cfg.repeatable if cfg.repeatable is not None else torch.ones_like(bias, dtype=torch.bool)

        def fused_step(span, masked, context_len, kv, steps_left):
            compiled.denoise_step(span, masked, context_len, kv, bias, first, repeatable, steps_left)
        return fused_step

    def _ar(self, entry, C: int, L: int, temps: list[float], req: CompletionRequest, gen, deadline,
            healing: Healing, compiled, multiline: bool, window: Cursor) -> tuple[list[list[int]], int, bool, bool]:
        """AR decoding of one candidate per temperature against the cached context: (rows, steps run,
        deadline hit, cancelled). A candidate ends where the editor's post-processing cuts, so the
        tokens after it are not decoded for nothing: at a single-line cursor (not `multiline`) with the
        first token that ends a line (postprocess.apply_line_policy), at a multi-line one with the first
        token of a line that leaves the cursor's block (postprocess.keep_block_indentation). The shown
        text is the same but where the suffix-overlap trim, which runs before the block cut, finds
        the shorter text's tail at the suffix's start: then the repeat of the suffix goes too."""
        sp = self.tokenizer.special
        banned, stop = self._ar_rules(window, healing, multiline)
        token_step = compiled.token_step if compiled else None
        outs = [ar_decode(self.model, entry.kv, C, entry.last_hidden, L, sp.eom, temp, req.top_p, gen, banned,
                          deadline, req.cancelled, healing.first_bias, token_step, stop, lookup=entry.tokens[:C],
                          encode_every=compiled.encode_every if compiled else None, lookup_tokens=self.lookup_tokens)
                for temp in temps]
        return ([o.span[0].tolist() for o in outs], sum(o.steps_run for o in outs),
                any(o.deadline_hit for o in outs), any(o.cancelled for o in outs))

    def _check(self, entry, C: int, rows: list[list[int]], accept: tuple[float, float], temps: list[float],
               req: CompletionRequest, gen, deadline, healing: Healing, compiled,
               multiline: bool, window: Cursor) -> tuple[list[list[int]], list[int], int, bool, bool]:
        """Each diffusion candidate checked by the AR path (check.py), up to AR's own length and stop:
        accept: (the tokens', the end's acceptance). (rows, draft tokens kept per row, forward passes,
        deadline hit, cancelled)."""
        sp = self.tokenizer.special
        banned, stop = self._ar_rules(window, healing, multiline)
        token_step = compiled.token_step if compiled else None
        L_ar = req.span_length or self.model.cfg.span_length
        outs = []
        for row, temp in zip(rows, temps):
            end = row.index(sp.eom) + 1 if sp.eom in row else len(row)
            draft = [t for t in row[:end] if t not in (sp.pad, sp.mask)]
            late = passed(deadline)
            if late or (req.cancelled is not None and req.cancelled()):   # the rest stay drafts: no pass each
                outs.append(CheckOutput(row, 0, 0, late, not late))     # kept: none the check kept
                continue
            outs.append(check_draft(self.model, entry.kv, C, entry.last_hidden, draft, accept[0], L_ar, sp.eom, banned,
                                    healing.first_bias, stop, token_step, compiled.encode_every if compiled else None,
                                    temp, req.top_p, gen, deadline, req.cancelled, accept_end=accept[1],
                                    lookup=entry.tokens[:C], lookup_tokens=self.lookup_tokens))
        return ([o.tokens for o in outs], [o.kept for o in outs], sum(o.passes for o in outs),
                any(o.deadline_hit for o in outs), any(o.cancelled for o in outs))

    def _ar_rules(self, window: Cursor, healing: Healing, multiline: bool) -> tuple[list[int], Callable]:
        """(banned ids, stop) of AR decoding, alone or after the check: the control tokens never appear
        inside a middle; at a single-line cursor it ends with the first token that ends a line, at a
        multi-line one with the first token of a line that leaves the cursor's block."""
        sp = self.tokenizer.special
        banned = [sp.pad, sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle]
        return banned, (self._block_stop(window, healing) if multiline else (lambda tokens: tokens[-1] in self.line_ends))

    def _block_stop(self, window: Cursor, healing: Healing):
        """stop(tokens) for AR at a multi-line cursor: the text so far has reached a line that dedents
        out of the cursor's block, as the windows around the cursor show it (read per token: a whole
        document of megabytes cost milliseconds a token)."""
        tok = self.tokenizer

        def stop(tokens: list[int]) -> bool:
            data = Healer.strip(tok.decode_bytes(tokens), healing.stub)
            return data is not None and leaves_block(to_lf(data.decode("utf-8", errors="ignore")), window)
        return stop

    def _texts(self, rows: list[list[int]], healing: Healing, cancelled: bool) -> tuple[list[str], list[bool]]:
        """Each row's text up to <|eom|> (the healed stub cut off) and whether it reached <|eom|>."""
        sp = self.tokenizer.special
        texts, finished = [], []
        for row in rows:
            end = row.index(sp.eom) if sp.eom in row else len(row)
            finished.append(end < len(row))
            data = Healer.strip(self.tokenizer.decode_bytes(t for t in row[:end] if t not in (sp.pad, sp.mask)),
                                healing.stub)
            texts.append((data or b"").decode("utf-8", errors="ignore"))
        return ([""] * len(rows) if cancelled else texts), finished
