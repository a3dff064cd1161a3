"""Static-shape span denoising for CUDA: fixed buffers, one CUDA graph per step shape, no host sync.

`denoise.denoise` is the reference loop. This module runs the same steps with every shape fixed per
bucket — span length L, candidates B, context capacity Cb (the context length C rounded up to 128) —
so each step is captured once in a CUDA graph and then replayed (gpt-fast's recipe: static caches,
capture the step, not the model):

* the context's keys/values are copied into one static buffer per layer, [1, H, max_positions, Dh];
  the span attends to its first Cb positions under a key mask that hides those at C and beyond, and
  its RoPE positions come from a device tensor, so any C in the bucket replays the same graph;
* logits are computed for all B·L positions, committed ones being masked out of the confidence,
  instead of gathering the masked rows, whose count the host would have to read back;
* the fixed and content rules run their T steps without reading anything back: a step after the
  span is finished (nothing left masked) commits nothing, and steps_run is counted on the device and read
  once at the end. The threshold rule reads one flag per step because stopping early is its point;
  a deadline does too, since wall-clock time only means something once the GPU has caught up.

Only greedy decoding (temperature 0) takes this path; sampling stays on `denoise`. With graphs=False
(the default off CUDA or without Triton) the same code runs eagerly: that is how the tests hold it to
`denoise` on the CPU, token for token.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from ..core.family import ModelFamily
from . import kernels
from .denoise import DenoiseConfig, DenoiseOutput, Step, StepPlan, banned_bias, step_body
from .length import place_end

CONTEXT_ROUND = 128


def context_bucket(context_len: int, max_positions: int) -> int:
    """The static context capacity a request of context_len tokens runs under."""
    return min(-(-context_len // CONTEXT_ROUND) * CONTEXT_ROUND, max_positions)


@dataclass(eq=False)
class StepBuffers:
    """The static state of one bucket; captured graphs read and write these tensors in place."""
    context_capacity: int
    span: torch.Tensor        # [B, L] token ids
    masked: torch.Tensor      # [B, L] bool
    positions: torch.Tensor   # [L] RoPE positions C..C+L-1
    key_mask: torch.Tensor    # [Cb + L] bool: the real context keys, then the span's own
    steps_run: torch.Tensor   # [] long: steps that started with something left to commit
    graphs: dict = field(default_factory=dict)   # Step.key(rule) -> torch.cuda.CUDAGraph


class StaticSpanDenoiser:
    """Greedy span denoising against a static context buffer, one bucket of buffers (and graphs) per
    shape. Holds GPU state between requests, so one thread owns it, as it owns the Engine."""

    def __init__(self, model: ModelFamily, mask_id: int, eom_id: int, pad_id: int, graphs: bool | None = None):
        self.model = model
        self.mask_id, self.eom_id, self.pad_id = mask_id, eom_id, pad_id
        self.device = model.embed.weight.device
        if graphs is None:   # capture needs the kernels: the torch pick copies its banned ids to the GPU
            graphs = self.device.type == "cuda" and kernels.enabled_for(model.embed.weight)
        self.graphs = graphs
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._arange: torch.Tensor | None = None
        self._first_bias: torch.Tensor | None = None   # [V] healing's bias on position 0 (0 = none)
        self._bias: torch.Tensor | None = None         # [V] the banned ids' bias
        self._repeatable: torch.Tensor | None = None   # [V] cfg.repeatable, copied in (neighbours.py)
        self._buckets: dict[tuple, StepBuffers] = {}
        self._pool = None

    @staticmethod
    def supports(cfg: DenoiseConfig) -> bool:
        return cfg.temperature <= 0

    def denoise(self, kv, context_len: int, n: int, cfg: DenoiseConfig, deadline: float | None = None,
                cancelled: Callable[[], bool] | None = None) -> DenoiseOutput:
        """`denoise.denoise` for greedy decoding, with the same arguments and results."""
        b = self._prepare(kv, context_len, n, cfg)
        plan = StepPlan(cfg.span_length, cfg.steps, deadline, cancelled)
        poll = cfg.rule == "threshold" or deadline is not None    # reading `masked` waits for the GPU
        for step in plan:
            self._run(b, cfg, step)
            if step.final or (poll and not b.masked.any()):
                break
        return DenoiseOutput(b.span.clone(), int(b.steps_run), plan.deadline_hit, plan.was_cancelled)

    # ---- static state ----------------------------------------------------------------------------
    def _prepare(self, kv, context_len: int, n: int, cfg: DenoiseConfig) -> StepBuffers:
        """Copy the context into the static KV buffer and reset the bucket's span (no sync)."""
        mcfg, dev = self.model.cfg, self.device
        if self._kv is None:
            self._kv = self.model.allocate_kv(mcfg.max_positions)
            self._arange = torch.arange(mcfg.max_positions, device=dev)
            self._first_bias = torch.zeros(mcfg.vocab_size, device=dev)
            self._bias = torch.zeros(mcfg.vocab_size, device=dev)
            self._repeatable = torch.zeros(mcfg.vocab_size, dtype=torch.bool, device=dev)
        L, C = cfg.span_length, context_len
        Cb = context_bucket(C, mcfg.max_positions)
        key = (L, n, Cb, cfg.rule, cfg.threshold, tuple(cfg.banned or ()), cfg.repeatable is not None)
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = StepBuffers(
                Cb, torch.empty(n, L, dtype=torch.long, device=dev), torch.empty(n, L, dtype=torch.bool, device=dev),
                torch.empty(L, dtype=torch.long, device=dev), torch.ones(Cb + L, dtype=torch.bool, device=dev),
                torch.zeros((), dtype=torch.long, device=dev))
        torch._foreach_copy_([t[:, :, :C] for layer in self._kv for t in layer],
                             [t[:, :, :C] for layer in kv for t in layer])
        torch.add(self._arange[:L], C, out=b.positions)
        torch.lt(self._arange[:Cb], C, out=b.key_mask[:Cb])
        if cfg.first_bias is None:
            self._first_bias.zero_()
        else:
            self._first_bias.copy_(cfg.first_bias)
        self._bias.copy_(banned_bias(tuple(cfg.banned or ()), mcfg.vocab_size, dev))
        if cfg.repeatable is not None:
            self._repeatable.copy_(cfg.repeatable)
        b.span.fill_(self.mask_id)
        b.masked.fill_(True)
        if cfg.end is not None:
            place_end(b.span, b.masked, cfg.end, self.eom_id, self.pad_id)
        b.steps_run.zero_()
        return b

    # ---- one step --------------------------------------------------------------------------------
    def _step(self, b: StepBuffers, cfg: DenoiseConfig, step: Step) -> None:
        """denoise.step_body against the static context: keys past C are masked out."""
        b.steps_run += b.masked.any()
        step_body(self.model, b.span, b.masked, b.context_capacity, self._kv, step.left, step.k, self._bias,
                  self._first_bias, cfg.rule, cfg.threshold, self.eom_id, self.pad_id,
                  positions=b.positions, key_mask=b.key_mask,
                  repeatable=self._repeatable if cfg.repeatable is not None else None)

    def _run(self, b: StepBuffers, cfg: DenoiseConfig, step: Step) -> None:
        if not self.graphs:
            self._step(b, cfg, step)
            return
        key = step.key(cfg.rule)
        graph = b.graphs.get(key)
        if graph is None:
            graph = b.graphs[key] = self._capture(b, lambda: self._step(b, cfg, step))
        graph.replay()

    def _capture(self, b: StepBuffers, step: Callable[[], None]) -> "torch.cuda.CUDAGraph":
        """Warm the step up on a side stream (Triton compiles, cuBLAS picks its kernels), capture it,
        then restore the state the warm-up advanced. All graphs share one memory pool: they never
        run concurrently and keep nothing in it between replays."""
        state = (b.span, b.masked, b.steps_run)
        saved = [t.clone() for t in state]
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            step()
        for t, s in zip(state, saved):
            t.copy_(s)
        return graph
