"""The public checkpoints' real shapes, with random weights made in place, for latency benchmarks:
a step's cost does not depend on the weights' values when the number of steps is fixed, so no
download is needed to time a 7B model.

Shapes are config.json values as FAMILIES.md (beside DESIGN.md) records them; CoDA's
max_position_embeddings is Qwen3-1.7B's (a GUESS: it bounds prompts only). The tokenizer is a tiny
replica's (ids are synthetic in a benchmark).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from .engine import FamilyEngine
from .loader import FAMILIES, Checkpoint, build_backbone, special_ids
from .replica import write_tokenizer_files
from .tokenizer import FamilyTokenizer

_QWEN25_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
              "num_key_value_heads": 4, "vocab_size": 152064, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
              "max_position_embeddings": 131072, "tie_word_embeddings": False}
SHAPES: dict[str, tuple[str, dict]] = {
    # Dream-v0-Base-7B, Dream-Coder-v0-7B, DiffuCoder-7B and DreamOn-v0-7B share Qwen2.5-7B's shape
    "dream-7b": ("dream", {"model_type": "Dream", **_QWEN25_7B}),
    "open-dcoder-0.5b": ("open-dcoder", {
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0, "max_position_embeddings": 32768, "tie_word_embeddings": True}),
    "coda-1.7b": ("coda", {
        "model_type": "CoDA", "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 40960}),
    "llada-8b": ("llada", {
        "model_type": "llada", "d_model": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 32,
        "mlp_hidden_size": 12288, "vocab_size": 126464, "embedding_size": 126464, "rope_theta": 500000.0,
        "rms_norm_eps": 1e-5, "max_sequence_length": 4096, "weight_tying": False}),
}


def random_family_engine(shape: str, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32,
                         layers: int | None = None, **options) -> FamilyEngine:
    """A FamilyEngine with `shape`'s sizes (one of SHAPES) and random weights; `layers` overrides the
    depth (the smoke test's tiny run). `options` go to FamilyEngine."""
    family_name, config = SHAPES[shape]
    config = dict(config)
    if layers is not None:
        config["n_layers" if family_name == "llada" else "num_hidden_layers"] = layers
    with tempfile.TemporaryDirectory() as tmp:
        write_tokenizer_files(Path(tmp), family_name)
        tokenizer = FamilyTokenizer.from_directory(Path(tmp))
    family = FAMILIES[family_name]
    where = Path(f"<{shape} with random weights>")
    ckpt = Checkpoint(where, family, config, tokenizer, special_ids(where, family, {}, tokenizer))
    backbone = build_backbone(ckpt, torch.device(device), dtype, weights="random")
    return FamilyEngine(backbone, ckpt, name=f"{shape} (random weights)", **options)
