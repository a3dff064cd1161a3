"""spanfill.engine: the diffusion infill engine. This module is its public API: the server, the
benchmarks and the editors' tooling import only the names in `__all__` (tests/test_layering.py
checks it).

    engine = Engine.load()                       # the shipped model; or a checkpoint directory
    result = engine.complete(CompletionRequest(prefix="def add(a, b):\n    return ", suffix="\n"))

Request/result types and limits come from `api` without importing torch, so the server can parse
its settings before any model loads; the rest is imported on first use.
"""
from __future__ import annotations

import importlib

from .api import (CHECKED_STEPS, DEFAULT_CHECK, DEFAULT_END_CHECK, DEFAULT_LENGTH, DTYPES, LENGTHS, MAX_CANDIDATES,
                  MAX_SPAN, MAX_STEPS, RULES, CancelledError, CompletionRequest, CompletionResult, Timings)

_LAZY = {   # name -> "module" or "module:attribute" that defines it (imported on first access: most import torch)
    "Engine": ".engine",
    "compiles_by_default": ".engine",
    "CheckpointError": ".core.checkpoint",
    "DEFAULT_MODEL_DIR": ".core.checkpoint",
    "cpu_has_fast_bf16": ".core.device",
    "TORCH_DEFAULT_THREADS": ".core.device",
    "Tokenizer": ".core.tokenizer",
    "shrink_lengths": ".decoding.length",
    "start_span": ".decoding.length",
    "Budget": ".decoding.prompt",
    "LINE_BREAK": ".decoding.prompt",
    "Snippet": ".decoding.prompt",
    "cut_prefix": ".decoding.prompt",
    "cut_suffix": ".decoding.prompt",
    "Cursor": ".decoding.postprocess",
    "finish": ".decoding.postprocess",
    "Shown": ".decoding.postprocess",
    "MIN_SHOWN_SHARE": ".decoding.postprocess",
    "to_lf": ".decoding.postprocess",
    "wants_multiline": ".decoding.postprocess",
    "read_split": ".training.corpus",
    "FRESH_LIST": ".training.fresh",
    "build_fresh_set": ".training.fresh",
    "Task": ".tools.scoring",
    "Score": ".tools.scoring",
    "warm": ".tools.scoring",
    "summarise": ".tools.scoring",
    "build_tasks": ".tools.scoring",
    "score": ".tools.scoring",
    "score_text": ".tools.scoring",
    "edit_similarity": ".tools.scoring",
    "exact": ".tools.scoring",
    "percentile": ".tools.scoring",
    "decoding_label": ".tools.scoring",
    "export_llama": ".tools.export_llama:export",
    "generate_completion": ".tools.export_llama",
    "kernels": ".decoding:kernels",
    "ModelConfig": ".core.config",
    "PRESETS": ".core.config",
    "SpanfillModel": ".core.model",
    "save_model": ".core.checkpoint",
    "train_tokenizer": ".core.tokenizer",
    "build_tiny_model": ".testing",
    "TrainStep": ".training.steps",
    "make_optimizer": ".training.steps",
    "context_width_for": ".training.objective",
    "BatchStream": ".training.objective",
    "ExampleStream": ".training.samples",
    "autocast_dtype": ".core.device",
    "set_threads": ".core.device",
    "FAMILY_SHAPES": ".families.shapes:SHAPES",
    "random_family_engine": ".families.shapes",
    "SAMPLE_PREFIX": ".testing",
    "SAMPLE_SUFFIX": ".testing",
}

__all__ = ["CHECKED_STEPS", "DEFAULT_CHECK", "DEFAULT_END_CHECK", "DEFAULT_LENGTH", "DTYPES", "LENGTHS",
           "MAX_CANDIDATES", "MAX_SPAN", "MAX_STEPS", "RULES", "CancelledError", "CompletionRequest",
           "CompletionResult", "Timings", *_LAZY]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'spanfill.engine' has no attribute {name!r}")
    module, _, attribute = _LAZY[name].partition(":")
    value = getattr(importlib.import_module(module, __name__), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
