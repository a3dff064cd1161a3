"""Checkpoints in Hugging Face layout: config.json, model.safetensors, tokenizer.json (+ MODEL_CARD.md).

Only safetensors are read: nothing is unpickled and no remote code runs. Every way a checkpoint can
be broken (missing directory or file, truncated or corrupt tensors, wrong shapes) raises
`CheckpointError` naming the path and what to do.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .config import ModelConfig
from .model import SpanfillModel, rope_tables
from .tokenizer import Tokenizer

DEFAULT_MODEL_DIR = Path(__file__).parents[1] / "default_model"
REQUIRED = ("config.json", "model.safetensors", "tokenizer.json")


class CheckpointError(RuntimeError):
    pass


def save_model(directory: Path, model: SpanfillModel, tok: Tokenizer) -> None:
    """Write atomically: into a sibling temp dir, then swap, so a crash never leaves half a checkpoint."""
    directory = Path(directory)
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.cfg.save(tmp)
    state = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    tok.save(tmp / "tokenizer.json")
    if directory.exists():
        for extra in directory.iterdir():  # keep files others wrote there (model card, train state)
            if not (tmp / extra.name).exists():
                os.replace(extra, tmp / extra.name)
        shutil.rmtree(directory)
    os.replace(tmp, directory)


def load_config(directory: Path) -> ModelConfig:
    try:
        return ModelConfig.from_json(json.loads((Path(directory) / "config.json").read_text()))
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        raise CheckpointError(f"{directory}/config.json is not a valid spanfill config ({err}); "
                              "re-export the checkpoint or point --model at another directory") from err


def load_model(directory: str | Path | None = None, device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32) -> tuple[SpanfillModel, Tokenizer]:
    directory = Path(directory) if directory else DEFAULT_MODEL_DIR
    if not directory.is_dir():
        raise CheckpointError(f"model directory {directory} does not exist; pass a directory holding "
                              f"{', '.join(REQUIRED)} (or train one with `spanfill train`)")
    missing = [name for name in REQUIRED if not (directory / name).is_file()]
    if missing:
        raise CheckpointError(f"model directory {directory} lacks {', '.join(missing)}; it is not a complete spanfill checkpoint")
    cfg = load_config(directory)
    try:
        tok = Tokenizer.from_file(directory / "tokenizer.json")
    except Exception as err:  # tokenizers raises bare Exceptions for corrupt JSON
        raise CheckpointError(f"{directory}/tokenizer.json cannot be read ({err})") from err
    try:
        state = load_file(str(directory / "model.safetensors"))
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{directory}/model.safetensors is truncated or corrupt ({err}); "
                              "restore it from the release or retrain") from err
    model = SpanfillModel(cfg)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"{directory}/model.safetensors does not match config.json: {err}") from err
    if tok.vocab_size > cfg.vocab_size:
        raise CheckpointError(f"tokenizer has {tok.vocab_size} tokens but the model only {cfg.vocab_size}")
    model = model.to(device=device, dtype=dtype).eval()
    model.rope_cos, model.rope_sin = (t.to(device) for t in rope_tables(cfg))  # keep rotary tables fp32
    return model, tok
