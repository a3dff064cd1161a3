"""Tiny random-weight checkpoints for tests: real tokenizer training, real model, real files, in
well under a second. Random weights emit arbitrary text; tests built on them assert behaviour
(shapes, caching, attention layout, protocol), never completion quality."""
from __future__ import annotations

from pathlib import Path

import torch

from .core.checkpoint import save_model
from .core.config import PRESETS, ModelConfig
from .core.model import SpanfillModel
from .core.tokenizer import train_tokenizer

SAMPLE_CODE = '''
import os
import sys


def add(a, b):
    """Return the sum of a and b."""
    return a + b


class Counter:
    def __init__(self, start=0):
        self.value = start

    def increment(self, step=1):
        self.value += step
        return self.value


def main(argv):
    for name in argv:
        if os.path.exists(name):
            print(name, os.path.getsize(name))
        else:
            print(f"missing: {name}", file=sys.stderr)
    return 0
'''


def tiny_config(**overrides) -> ModelConfig:
    cfg = ModelConfig(**{**PRESETS["tiny"].__dict__, "special_tokens": {}})
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def build_tiny_model(directory: str | Path, seed: int = 0, **overrides) -> Path:
    directory = Path(directory)
    cfg = tiny_config(**overrides)
    tok = train_tokenizer(iter([SAMPLE_CODE] * 4), cfg.vocab_size)
    cfg.vocab_size = tok.vocab_size   # a small sample may not fill the requested vocabulary
    cfg.special_tokens = {name: getattr(tok.special, name) for name in tok.special.__dataclass_fields__}
    torch.manual_seed(seed)
    save_model(directory, SpanfillModel(cfg), tok)
    return directory


# A cursor inside `add`: "return a|" with " + b" and the rest of the file after it.
_CURSOR = SAMPLE_CODE.index("return a + b") + len("return a")
SAMPLE_PREFIX = SAMPLE_CODE[:_CURSOR]
SAMPLE_SUFFIX = SAMPLE_CODE[_CURSOR + len(" + b"):]
