"""CUDA graphs of the window step (the dual cache's per-step forward), one per cache buffer and
window shape. Shapes are static by construction: the cache's capacity is a bucket (engine.py), the
window is the span (plus one position for shifted families) and the mask is the cache's own
buffer, so a completion only copies its window tokens and positions in and replays.

The first replay of a shape captures it (after two warm-up runs on a side stream, as PyTorch's
graph recipe asks); a capture that fails turns the graphs off for the engine, which then runs the
same step eagerly, and `state` says why. Only on CUDA: the CPU runs the step eagerly.
"""
from __future__ import annotations

import logging

import torch

from .common import Backbone
from .dual_cache import DualCache

log = logging.getLogger(__name__)


class WindowGraphs:
    def __init__(self, backbone: Backbone):
        self.backbone = backbone
        self.graphs: dict[tuple, tuple] = {}     # (cache key, ids shape) -> (graph, ids, positions, hidden)
        self.error: str | None = None

    @property
    def usable(self) -> bool:
        return self.error is None

    @property
    def state(self) -> str:
        return f"failed: {self.error}" if self.error else f"on ({len(self.graphs)} captured)"

    def forget(self, cache_key: tuple) -> None:
        for key in [k for k in self.graphs if k[0] == cache_key]:
            del self.graphs[key]

    def run(self, cache: DualCache, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        key = ((cache.batch, cache.window, cache.capacity), tuple(ids.shape))
        entry = self.graphs.get(key)
        if entry is None:
            try:
                entry = self.graphs[key] = self._capture(cache, ids, positions)
            except Exception as err:      # an op the graph cannot hold: run eagerly from now on
                self.error = f"{type(err).__name__}: {err}"
                log.warning("CUDA graph capture failed, window steps run eagerly: %s", self.error)
                return self.backbone.hidden(ids, positions, cache.window_mask(), cache)
        graph, static_ids, static_positions, hidden = entry
        static_ids.copy_(ids)
        static_positions.copy_(positions)
        graph.replay()
        return hidden

    def _capture(self, cache: DualCache, ids: torch.Tensor, positions: torch.Tensor):
        static_ids, static_positions = ids.clone(), positions.clone()

        def step():      # always the mask buffer: a graph cannot switch between a mask and none
            return self.backbone.hidden(static_ids, static_positions, cache.mask, cache)

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            hidden = step()
        return graph, static_ids, static_positions, hidden
