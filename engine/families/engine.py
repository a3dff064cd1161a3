"""`FamilyEngine`: inline completions from a public diffusion checkpoint (Dream family, Open-dCoder,
CoDA, LLaDA), with the public surface of spanfill's own `Engine` (complete, info, cache_stats,
tokenizer, budget), so the server, `spanfill batch` and `spanfill eval` drive either.

One completion: cut the windows, lay out the family's infill prompt with L masks, then denoise:

    first step   one full forward over the whole prompt (exact); its keys/values are recorded and
                 the context's kept in the dual cache (dual_cache.py); it also decides the length
                 (length.py)
    later steps  the span's window only, against the cached context (Fast-dLLM's dual cache), or,
                 with dual_cache=False, a full forward every step (the exact baseline)

Each step's commits follow the engine's rules (decoding/denoise.py: pick_tokens, choose_commit and
apply_commit, with the family's end token as both <|eom|> and pad). The step loop is this module's
own, not denoise.denoise: core/family.py's seam encodes a causal context once, and a bidirectional
context has no such encoding (its first step is a full forward that includes the span). Candidates are one batch. On CUDA the window step
replays a captured graph (graphs.py); weights run in bf16 there.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace

import torch

from ..api import CompletionRequest, CompletionResult, Timings, begin, check_request
from ..decoding.denoise import DenoiseConfig, StepPlan, apply_commit, choose_commit, passed, pick_tokens
from ..decoding.prompt import Budget, cut_windows
from .common import Backbone
from .dual_cache import DualCache, PrefixStore, Recorder
from .graphs import WindowGraphs
from .length import STRATEGIES, candidate_lengths, choose_length, end_split, expand_delete, length_scores
from .loader import Checkpoint

NEG_INF = float("-inf")
CAPACITY_BUCKET = 256        # CUDA: context capacities round up to this, so caches and graphs are reused
POOL_ENTRIES = 8             # CUDA: dual caches (and their graphs) kept
DREAMON_MAX = 64             # DreamOn: the longest a span may grow (GUESS: the publisher's limit was not read)


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


@dataclass(frozen=True)
class Layout:
    """The infill prompt of one span length: `ids` with `length` masks from `start`."""
    ids: tuple[int, ...]
    start: int
    length: int
    shifted: bool

    @property
    def window(self) -> tuple[int, int]:
        """The positions a window step runs: the span, and for a shifted family the position before
        it, whose output predicts the span's first token."""
        return (max(self.start - 1, 0) if self.shifted else self.start), self.start + self.length

    @property
    def after(self) -> tuple[int, ...]:
        """The prompt after the window (the suffix and what follows it): what every key before the
        window attended to (dual_cache.PrefixStore)."""
        return self.ids[self.window[1]:]

    def rows(self, offset: int = 0) -> torch.Tensor:
        """[length] the output row predicting each span position, counted from position `offset`.
        Shifted: the row before (position 0 predicts itself, as the publishers' shift does)."""
        j = torch.arange(self.length) + self.start
        return ((j - 1).clamp_min(0) if self.shifted else j) - offset

    def context(self) -> torch.Tensor:
        """[C] the positions outside the window: what the dual cache holds."""
        w0, w1 = self.window
        return torch.cat([torch.arange(w0), torch.arange(w1, len(self.ids))])


@dataclass
class Outcome:
    rows: list[list[int]]      # per candidate, the span's tokens
    forwards: int              # model forward passes (full or window)
    steps: int                 # denoising steps
    context_tokens: int
    reused: int
    encoded: int
    deadline_hit: bool = False
    cancelled: bool = False


class FamilyEngine:
    def __init__(self, backbone: Backbone, ckpt: Checkpoint, name: str, length: str | None = None,
                 dual_cache: bool = True, reuse_prefix: bool = True, max_context_tokens: int | None = None,
                 cuda_graphs: bool | None = None):
        self.backbone, self.ckpt, self.family = backbone, ckpt, ckpt.family
        self.tokenizer = ckpt.tokenizer
        self.special = ckpt.special
        self.name = name
        self.device = next(backbone.module.parameters()).device
        self.dtype = next(backbone.module.parameters()).dtype
        self.threads = torch.get_num_threads()
        # never proposed: control tokens, and the embedding rows past the tokenizer's last token (padding
        # in every family); one [V] bias added to the logits, whatever the number of ids
        self.banned = sorted(set(ckpt.special.banned) | set(range(ckpt.tokenizer.vocab_size, backbone.shape.vocab_size)))
        self.bias = torch.zeros(backbone.shape.vocab_size, device=self.device)
        self.bias[self.banned] = NEG_INF
        on_cuda = self.device.type == "cuda"
        # the first step's extra rows (`confidence`) are nearly free on a GPU, a full forward each on a CPU
        self.length = length or ("expand" if self.family.expand else "confidence" if on_cuda else "eos")
        if self.length not in STRATEGIES or (self.length == "expand") != (self.family.expand is not None):
            raise ValueError(f"length strategy {self.length!r} does not fit {self.family.name}; use "
                             + ("'expand'" if self.family.expand else "'eos', 'confidence' or 'fixed'"))
        self.dual_cache, self.reuse_prefix = dual_cache, reuse_prefix and dual_cache
        self.max_context_tokens = max_context_tokens or (1024 if on_cuda else 256)
        prefix_share = int(self.max_context_tokens * 0.75)
        self.budget = Budget(prefix_share, self.max_context_tokens - prefix_share, 0)
        self.prefixes = PrefixStore()
        use_graphs = on_cuda if cuda_graphs is None else cuda_graphs and on_cuda
        self.graphs = WindowGraphs(backbone) if use_graphs else None
        self._pool: dict[tuple[int, int, int], DualCache] = {}
        self._lock = threading.Lock()

    # -- the public surface shared with Engine ---------------------------------------------------
    @property
    def info(self) -> dict:
        shape = self.backbone.shape
        return {"model": self.name, "family": self.family.name, "device": str(self.device),
                "dtype": str(self.dtype).replace("torch.", ""), "int8_matmuls": False,
                "params": self.backbone.num_params(), "span_length": self.family.span_length,
                "steps": self.family.steps, "max_context_tokens": self.max_context_tokens,
                "max_positions": shape.max_positions, "threads": self.threads, "modes": ["diffusion"],
                "length": self.length, "dual_cache": self.dual_cache, "prefix_reuse": self.reuse_prefix,
                "cuda_graphs": self.graphs.state if self.graphs else "off",
                "compiled": False, "compile": "off", "compile_seconds": None, "compiled_fallbacks": None}

    @property
    def cache_stats(self) -> dict:
        return self.prefixes.stats

    def warmup(self) -> None:
        self.complete(CompletionRequest(prefix="def f(x):\n    return ", suffix="\n", steps=2))
        self.prefixes = PrefixStore()

    def complete(self, req: CompletionRequest) -> CompletionResult:
        with self._lock, torch.inference_mode():
            return self._complete(req)

    def _complete(self, req: CompletionRequest) -> CompletionResult:
        L, T = check_request(req, self.family.span_length, self.family.steps, ("diffusion",),
                             f" for {self.family.name}: a bidirectional diffusion model has no causal path",
                             vocab_size=self.backbone.shape.vocab_size)
        t_start, deadline = begin(req)
        timings = Timings()
        t0 = time.perf_counter()
        prefix, suffix = req.prefix, req.suffix
        if req.cut:   # snippets have no place in these models' infill prompts: they are left out
            budget = self.budget_beside(DREAMON_MAX if self.family.expand else L)
            prefix, suffix = cut_windows(self.tokenizer, prefix, suffix, budget)
        # windows the caller cut may come with their ids (the server's): not encoded again
        prefix_ids = self.tokenizer.encode(prefix) if req.prefix_ids is None else req.prefix_ids
        suffix_ids = self.tokenizer.encode(suffix) if req.suffix_ids is None else req.suffix_ids
        timings.tokenize_ms = _ms(t0)
        gen = None
        if req.temperature > 0:
            gen = torch.Generator(device=self.device)
            gen.manual_seed(req.seed if req.seed is not None else int(time.time_ns()) & 0xFFFFFFFF)
        t0 = time.perf_counter()
        self.prefixes.begin()
        out = self.infill_ids(prefix_ids, suffix_ids, L, T, req.n, req.rule, req.threshold, req.temperature,
                              req.top_p, req.greedy_first, gen, deadline, req.cancelled)
        timings.denoise_ms = _ms(t0)
        t0 = time.perf_counter()
        texts, finished = [], []
        ends, skip = set(self.special.ends), {self.special.mask, self.special.expand}
        for row in out.rows:
            end = next((i for i, t in enumerate(row) if t in ends), None)
            finished.append(end is not None or self.length != "fixed")
            texts.append(self.tokenizer.decode(t for t in row[:end] if t not in skip))
        if out.cancelled:
            texts = [""] * len(out.rows)
        timings.detokenize_ms = _ms(t0)
        timings.total_ms = _ms(t_start)
        self.prefixes.count(out.reused, out.encoded)
        return CompletionResult(texts, out.context_tokens, out.reused, out.encoded, out.forwards, finished,
                                out.deadline_hit, out.cancelled, timings)

    def budget_beside(self, span: int) -> Budget:
        """The windows' budget, cut where the model's positions leave less beside a span of `span` and
        the prompt's bos and eos."""
        room = max(0, self.backbone.shape.max_positions - span - 2)
        if self.budget.prefix_tokens + self.budget.suffix_tokens <= room:
            return self.budget
        return Budget(int(room * 0.75), room - int(room * 0.75), 0)

    # -- denoising -------------------------------------------------------------------------------
    def layout(self, prefix_ids: list[int], suffix_ids: list[int], length: int, span: list[int] | None = None) -> Layout:
        sp = self.special
        ids, start = self.family.infill(prefix_ids, span or [sp.mask] * length, suffix_ids, sp.bos, sp.eos)
        if len(ids) > self.backbone.shape.max_positions:
            raise ValueError(f"a prompt of {len(ids)} tokens exceeds the model's {self.backbone.shape.max_positions} "
                             "positions; pass cut=True or shorter windows")
        return Layout(tuple(ids), start, length, self.family.shifted)

    def infill_ids(self, prefix_ids: list[int], suffix_ids: list[int], span_length: int, steps: int, n: int = 1,
                   rule: str = "content", threshold: float = 0.9, temperature: float = 0.0, top_p: float = 1.0,
                   greedy_first: bool = False, gen: torch.Generator | None = None, deadline: float | None = None,
                   cancelled=None) -> Outcome:
        """Denoise n candidate spans between prefix_ids and suffix_ids (`complete` without the text,
        and the benchmarks' entry point)."""
        cfg = DenoiseConfig(span_length, steps, rule, threshold, temperature, top_p, greedy_first=greedy_first)
        if self.length == "expand":
            greedy = replace(cfg, temperature=0.0) if cfg.greedy_first else cfg   # candidate 0's
            outs = []
            for i in range(n):      # one at a time: a candidate begun after the deadline is left empty
                if i > 0 and passed(deadline):
                    outs.append(Outcome([[]], 0, 0, 0, 0, 0, True, False))
                    continue
                outs.append(self._expand_row(prefix_ids, suffix_ids, greedy if i == 0 else cfg, gen, deadline, cancelled))
            first = outs[0]
            return Outcome([o.rows[0] for o in outs], sum(o.forwards for o in outs), max(o.steps for o in outs),
                           first.context_tokens, first.reused, first.encoded, any(o.deadline_hit for o in outs),
                           any(o.cancelled for o in outs))
        return self._fixed_rows(prefix_ids, suffix_ids, cfg, n, gen, deadline, cancelled)

    def full_forward(self, layouts: list[Layout], spans: torch.Tensor | None = None, record: bool = True):
        """One full forward over `layouts` (one per batch row; or one layout, its span per row of
        `spans` [B, l]). Returns (hidden of each row's span [B, l, D], the Recorder or None, reused r)."""
        N = max(len(lay.ids) for lay in layouts)
        rows = len(layouts) if spans is None else spans.shape[0]
        r, prefix = 0, None
        if record and self.reuse_prefix:
            after = layouts[0].after
            if all(lay.after == after for lay in layouts):
                r, prefix = self.prefixes.lookup(list(layouts[0].ids), min(lay.window[0] for lay in layouts), after)
        ids = torch.full((rows, N), self.special.mask, dtype=torch.long)
        for i in range(rows):
            lay = layouts[min(i, len(layouts) - 1)]
            ids[i, :len(lay.ids)] = torch.tensor(lay.ids)
        ids = ids.to(self.device)
        if spans is not None:
            lay = layouts[0]
            ids[:, lay.start:lay.start + lay.length] = spans
        mask = None
        if len({len(lay.ids) for lay in layouts}) > 1:     # right-padded rows: their padding is no key
            lengths = torch.tensor([len(lay.ids) for lay in layouts], device=self.device)
            mask = (torch.arange(N, device=self.device)[None, :] < lengths[:, None])[:, None, None, :]
        positions = torch.arange(r, N, device=self.device)[None]
        recorder = Recorder(prefix) if record else None
        hidden = self.backbone.hidden(ids[:, r:], positions, mask, recorder)          # [B, N - r, D]
        width = max(lay.length for lay in layouts)
        span_rows = torch.zeros(rows, width, dtype=torch.long)            # padded rows repeat row 0
        for i in range(rows):
            own = layouts[min(i, len(layouts) - 1)].rows(r)
            span_rows[i, :own.numel()] = own
        picked = hidden.gather(1, span_rows.to(self.device)[..., None].expand(-1, -1, hidden.shape[-1]))
        return picked, recorder, r

    def cache_for(self, n: int, lay: Layout) -> DualCache:
        w0, w1 = lay.window
        C = len(lay.ids) - (w1 - w0)
        if self.device.type != "cuda":
            return DualCache(self.backbone.shape, n, w1 - w0, C, self.dtype, self.device)
        key = (n, w1 - w0, -(-C // CAPACITY_BUCKET) * CAPACITY_BUCKET)
        if key not in self._pool:
            if len(self._pool) >= POOL_ENTRIES:
                dropped = next(iter(self._pool))
                self._pool.pop(dropped)
                if self.graphs:
                    self.graphs.forget(dropped)
            self._pool[key] = DualCache(self.backbone.shape, n, key[1], key[2], self.dtype, self.device)
        return self._pool[key]

    def window_step(self, cache: DualCache, lay: Layout, span: torch.Tensor) -> torch.Tensor:
        """One window step: [n, l] span -> hidden of the rows predicting it [n, l, D]."""
        w0, w1 = lay.window
        ids = torch.cat([torch.tensor(lay.ids[w0:lay.start], dtype=torch.long, device=self.device).expand(span.shape[0], -1), span], 1)
        positions = torch.arange(w0, w1, device=self.device)[None]
        if self.graphs is not None and self.graphs.usable:
            hidden = self.graphs.run(cache, ids, positions)
        else:
            hidden = self.backbone.hidden(ids, positions, cache.window_mask(), cache)
        return hidden[:, lay.rows(w0).to(self.device)]

    def keep_prefix(self, recorder: Recorder, row: int, lay: Layout) -> None:
        if self.reuse_prefix:
            w0 = lay.window[0]
            self.prefixes.keep(list(lay.ids[:w0]), recorder.positions(row, torch.arange(w0, device=self.device)),
                               lay.after, reused=recorder.prefix is not None)

    def pick(self, hidden: torch.Tensor, masked: torch.Tensor, cfg: DenoiseConfig | None, gen, bias: torch.Tensor):
        """Proposals for the masked positions: (confidence [n, l], proposal [n, l]); `bias` [V] bans
        ids; greedy without a cfg, and for the first candidate when cfg.greedy_first."""
        logits = self.backbone.logits(hidden[masked]).float() + bias                  # [masked rows, V]
        if cfg is None:
            conf_m, tok_m = pick_tokens(logits)
        elif cfg.greedy_first and cfg.temperature > 0 and masked.shape[0] > 1:
            first = int(masked[0].sum())
            c0, t0 = pick_tokens(logits[:first])
            c1, t1 = pick_tokens(logits[first:], cfg.temperature, cfg.top_p, gen)
            conf_m, tok_m = torch.cat([c0.float(), c1.float()]), torch.cat([t0, t1])
        else:
            conf_m, tok_m = pick_tokens(logits, cfg.temperature, cfg.top_p, gen)
        confidence = torch.full(masked.shape, NEG_INF, device=self.device)
        proposal = torch.full(masked.shape, self.special.mask, dtype=torch.long, device=self.device)
        confidence[masked] = conf_m.float()
        proposal[masked] = tok_m
        return confidence, proposal

    def _end_probability(self, hidden: torch.Tensor) -> torch.Tensor:
        """[B, l, D] -> [B, l] probability of an end token (banned ids excluded, as picking does)."""
        logits = self.backbone.logits(hidden).float() + self.bias
        logp = torch.log_softmax(logits, dim=-1)
        return logp[..., list(self.special.ends)].logsumexp(-1).exp()

    def _fixed_rows(self, prefix_ids, suffix_ids, cfg: DenoiseConfig, n, gen, deadline, cancelled) -> Outcome:
        """Every strategy but `expand`: choose the length in the first step, then denoise n rows of it."""
        L = cfg.span_length
        lengths = candidate_lengths(L) if self.length == "confidence" else [L]
        layouts = [self.layout(prefix_ids, suffix_ids, length) for length in lengths]
        record = self.dual_cache
        hidden, recorder, reused = self.full_forward(layouts, record=record)
        forwards, encoded = 1, len(layouts[0].ids) - reused
        choice, ended_at = 0, None
        if self.length == "confidence":
            masked = torch.ones(hidden.shape[:2], dtype=torch.bool, device=self.device)
            confidence, _ = self.pick(hidden, masked, None, None, self.bias)
            choice = choose_length(length_scores(confidence, lengths))
        elif self.length == "eos" and L > 1:
            chosen = int(end_split(self._end_probability(hidden))[0])
            if chosen < L and passed(deadline):
                ended_at = chosen     # no time to lay the span out at that length: this one ends there
            elif chosen < L:
                layouts = [self.layout(prefix_ids, suffix_ids, chosen)]
                hidden, recorder, _ = self.full_forward(layouts, record=record)
                forwards += 1
        lay = layouts[choice]
        hidden = hidden[choice:choice + 1, :lay.length].expand(n, -1, -1)
        cache = None
        if record:
            cache = self.cache_for(n, lay)
            cache.fill(recorder, choice, lay.context().to(self.device))
            self.keep_prefix(recorder, choice, lay)
        l = lay.length
        span = torch.full((n, l), self.special.mask, dtype=torch.long, device=self.device)
        masked = torch.ones(n, l, dtype=torch.bool, device=self.device)
        if ended_at is not None:
            span[:, ended_at:], masked[:, ended_at:] = self.special.ends[0], False
        cfg = DenoiseConfig(**{**cfg.__dict__, "span_length": l})
        plan = StepPlan(l, cfg.steps, deadline, cancelled)
        end, steps = self.special.ends[0], 0
        for step in plan:
            if steps > 0:
                hidden = self.window_step(cache, lay, span) if cache is not None else self.full_forward([lay], span, record=False)[0]
                forwards += 1
            steps += 1
            confidence, proposal = self.pick(hidden, masked, cfg, gen, self.bias)
            proposal = torch.where(torch.isin(proposal, torch.tensor(self.special.ends, device=self.device)), end, proposal)
            commit = choose_commit(span, masked, confidence, proposal, step.left, step.k, cfg.rule, cfg.threshold, end)
            apply_commit(span, masked, commit, proposal, end, end)
            if step.final or not masked.any():
                break
        return Outcome(span.tolist(), forwards, steps, len(lay.ids) - l, reused, encoded,
                       plan.deadline_hit, plan.was_cancelled)

    def _expand_row(self, prefix_ids, suffix_ids, cfg: DenoiseConfig, gen, deadline, cancelled) -> Outcome:
        """DreamOn, one candidate: the span grows at committed <|expand|> and shrinks at committed
        deletes; while its length holds, steps run on the window against the dual cache, and a
        change of length lays the prompt out again (a full forward, the prefix reused)."""
        sp = self.special
        tokens = torch.full((cfg.span_length,), sp.mask, dtype=torch.long, device=self.device)
        masked = torch.ones_like(tokens, dtype=torch.bool)
        plan = StepPlan(cfg.span_length, cfg.steps, deadline, cancelled)
        no_expand = self.bias.clone()
        no_expand[sp.expand] = NEG_INF
        lay, cache = None, None
        forwards = steps = 0
        reused = encoded = context = 0
        for step in plan:
            if tokens.numel() == 0:
                break
            steps += 1
            if lay is None or lay.length != tokens.numel() or cache is None:
                lay = self.layout(prefix_ids, suffix_ids, tokens.numel(), tokens.tolist())
                hidden, recorder, r = self.full_forward([lay], record=self.dual_cache)
                if forwards == 0:
                    reused, encoded, context = r, len(lay.ids) - r, len(lay.ids) - lay.length
                if self.dual_cache:
                    cache = self.cache_for(1, lay)
                    cache.fill(recorder, 0, lay.context().to(self.device))
                    self.keep_prefix(recorder, 0, lay)
            else:
                hidden = self.window_step(cache, lay, tokens[None])
            forwards += 1
            final = step.final
            bias = no_expand if final or tokens.numel() >= DREAMON_MAX else self.bias
            confidence, proposal = self.pick(hidden, masked[None], cfg, gen, bias)
            if final:
                commit = masked.clone()
            else:   # ceil(masked / steps left) most confident: the schedule stretches as the span grows
                k = -(-int(masked.sum()) // step.left)
                commit = torch.zeros_like(masked)
                commit[confidence[0].topk(k).indices] = True
                commit &= masked
            before = tokens.numel()
            tokens, masked = expand_delete(tokens, masked, commit, proposal[0], sp.mask, sp.expand, sp.delete, DREAMON_MAX)
            if tokens.numel() != before:
                cache = None
            elif not self.dual_cache:
                lay = None
            if not masked.any() or final:
                break
        return Outcome([tokens.tolist()], forwards, steps, context, reused, encoded,
                       plan.deadline_hit, plan.was_cancelled)
