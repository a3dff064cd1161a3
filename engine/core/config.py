"""Model configuration: one dataclass, named presets, saved as config.json inside every checkpoint.

The config is the single source of truth for shapes; a checkpoint rebuilds its model from it
(nanoGPT-style), so no code path needs to know sizes in advance.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ..api import MAX_SPAN, MAX_STEPS

MAX_POSITIONS = 1 << 20
# what the weights do not settle (n_heads, the rotary tables, the norms' eps) or settle only with them:
# a config without one is refused. The engine's defaults (span_length, steps, max_context_tokens) and
# the length head (length_classes: 0 = none) may be left out
REQUIRED_KEYS = ("vocab_size", "dim", "n_layers", "n_heads", "ffn_dim", "max_positions", "rope_theta", "norm_eps")

MODEL_TYPE = "spanfill"


@dataclass
class ModelConfig:
    vocab_size: int = 8192
    dim: int = 320
    n_layers: int = 6
    n_heads: int = 5
    ffn_dim: int = 864
    max_positions: int = 2048
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    span_length: int = 32          # default L used by the engine when a request does not say
    steps: int = 4                 # default T
    max_context_tokens: int = 448  # context budget the model was trained with
    # the length head's classes (0 = no head): the middle's token count 0..K-2, and K-1 for "K-1 or
    # more", read at <|middle|> before the span is decoded (the `head` length strategy)
    length_classes: int = 0
    special_tokens: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or isinstance(value, bool)
                                    or value < (0 if f.name == "length_classes" else 1)):
                raise ValueError(f"{f.name}={value!r} must be an integer of at least "
                                 f"{0 if f.name == 'length_classes' else 1}")
            if f.type == "float" and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                      or not 0 < value < float("inf")):
                raise ValueError(f"{f.name}={value!r} must be a number above 0")
        if not isinstance(self.special_tokens, dict) or not all(
                isinstance(v, int) and 0 <= v < self.vocab_size for v in self.special_tokens.values()):
            raise ValueError(f"special_tokens must map names to token ids below vocab_size={self.vocab_size}")
        if self.steps > MAX_STEPS or self.span_length > MAX_SPAN:   # a request's defaults: check_request's bounds
            raise ValueError(f"steps={self.steps} / span_length={self.span_length} past the most a request "
                             f"may ask for ({MAX_STEPS} / {MAX_SPAN})")
        if self.max_positions > MAX_POSITIONS:     # its rotary tables are not in the weights: built at load
            raise ValueError(f"max_positions={self.max_positions} past the most a spanfill model may have "
                             f"({MAX_POSITIONS})")
        if self.max_positions <= self.span_length:
            raise ValueError(f"max_positions={self.max_positions} leaves no room for context beside "
                             f"span_length={self.span_length}")
        if self.dim % self.n_heads:
            raise ValueError(f"dim={self.dim} is not divisible by n_heads={self.n_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for rotary embeddings")

    def to_json(self) -> dict:
        return {"model_type": MODEL_TYPE, **dataclasses.asdict(self)}

    @classmethod
    def from_json(cls, data: dict) -> "ModelConfig":
        if not isinstance(data, dict):
            raise ValueError(f"config.json holds a JSON {type(data).__name__}, not an object")
        if data.get("model_type") != MODEL_TYPE:
            raise ValueError(f"config.json has model_type={data.get('model_type')!r}, expected {MODEL_TYPE!r}")
        if missing := [key for key in REQUIRED_KEYS if key not in data]:   # a default would be silently wrong
            raise ValueError(f"config.json lacks {', '.join(missing)}")
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, directory: Path) -> None:
        (Path(directory) / "config.json").write_text(json.dumps(self.to_json(), indent=2) + "\n")


PRESETS: dict[str, ModelConfig] = {
    # Tests: random weights, builds in milliseconds.
    "tiny": ModelConfig(vocab_size=512, dim=64, n_layers=2, n_heads=4, ffn_dim=128, max_positions=1024,
                        span_length=16, steps=4, max_context_tokens=256),
    # Shipped default: sized for CPU training throughput (see MODEL_CARD.md): with some 10M tokens
    # per few hours of 2-core training, a smaller model learns more per FLOP than a wider one.
    "small": ModelConfig(vocab_size=8192, dim=320, n_layers=6, n_heads=5, ffn_dim=864),
    "base": ModelConfig(vocab_size=8192, dim=512, n_layers=8, n_heads=8, ffn_dim=1408),
}
