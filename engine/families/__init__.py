"""Public diffusion code checkpoints served natively (DESIGN §9): the Dream family (Dream-v0,
Dream-Coder, DiffuCoder, DreamOn), Open-dCoder, CoDA and LLaDA.

    engine = load_engine("/path/to/DiffuCoder-7B-Base")     # or a hub id found in the local HF cache
    engine.complete(CompletionRequest(prefix=..., suffix=...))

`Engine.load` hands any checkpoint that is not spanfill's own here (`handles`). Modules: common
(the Family description, config and safetensors reading), one per family (dream, open_dcoder, coda,
llada), stock (Qwen2/Qwen3 through transformers' stock classes), tokenizer, hub (the local cache),
loader (detection), dual_cache, length, graphs and engine (the diffusion engine), shapes (the real
models' shapes with random weights, for benchmarks) and replica (tiny on-disk replicas, for tests).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .hub import looks_like_hub_id

__all__ = ["handles", "load_engine"]


def is_spanfill(directory: Path) -> bool:
    try:
        return json.loads((directory / "config.json").read_text()).get("model_type") == "spanfill"
    except (OSError, ValueError, AttributeError):
        return True      # unreadable: spanfill's own loader reports what is wrong with it


def handles(path) -> bool:
    """Whether `Engine.load(path)` is for this package: a checkpoint directory that is not
    spanfill's own, or a hub id that is not a local path. Cheap: imports nothing heavy."""
    if path is None:
        return False
    directory = Path(path)
    if directory.is_dir():
        return (directory / "config.json").is_file() and not is_spanfill(directory)
    return looks_like_hub_id(str(path))


def load_engine(path: str | Path, device: str = "auto", dtype: str = "auto", warmup: bool = True,
                threads: int | None = None, **options):
    """A FamilyEngine for the checkpoint at `path` (a directory, or a hub id in the local cache;
    SPANFILL_DOWNLOAD=1 lets a hub id that is not cached be downloaded). `options` go to
    FamilyEngine (length, dual_cache, reuse_prefix, max_context_tokens, cuda_graphs)."""
    from ..core.device import pick_device, pick_dtype, set_threads
    from .engine import FamilyEngine
    from .loader import build_backbone, open_checkpoint

    if dtype == "int8":
        raise ValueError("dtype int8 is for spanfill's own model; use fp32 or bf16 for a public checkpoint")
    dev = pick_device(device)
    ckpt = open_checkpoint(path, download=os.environ.get("SPANFILL_DOWNLOAD") == "1")
    backbone = build_backbone(ckpt, dev, pick_dtype(dev, dtype))
    if threads is not None:
        set_threads(threads)
    engine = FamilyEngine(backbone, ckpt, name=str(path), **options)
    if warmup:
        engine.warmup()
    return engine
