"""Checkpoints in Hugging Face layout: config.json, model.safetensors, tokenizer.json (+ MODEL_CARD.md).
The weights may instead be sharded as Hugging Face shards them: model-0000i-of-0000n.safetensors and
model.safetensors.index.json, whose weight_map names each tensor's file (where files have a size limit).

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
INDEX = "model.safetensors.index.json"


class CheckpointError(RuntimeError):
    pass


def save_model(directory: Path, model: SpanfillModel, tok: Tokenizer, shard_bytes: int | None = None,
               dtype: torch.dtype = torch.float32) -> None:
    """Write atomically: into a sibling temp dir, then swap, so a crash never leaves half a checkpoint.
    shard_bytes: write the weights as shards of at most that many bytes each, with their index;
    dtype: the weights' dtype on disk (the loader casts to the engine's)."""
    def fill(tmp: Path) -> None:
        model.cfg.save(tmp)
        state = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
        if shard_bytes is None:
            save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        else:
            _save_shards(tmp, state, shard_bytes)
        tok.save(tmp / "tokenizer.json")
    write_model_folder(directory, fill)


def write_model_folder(directory: Path, fill) -> None:
    """Replace the model folder `directory` atomically with what `fill(tmp)` writes into a sibling
    temp dir, keeping the folder's other files (a model card, a run's state) but not its old weights."""
    directory = check_writable_folder(directory)
    tmp, old = _swap_folders(directory)
    recover_swap(directory)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:                                 # until the folder moves aside, a failure leaves it as it was, alone
        fill(tmp)
        if not directory.exists():
            os.replace(tmp, directory)
            return
        for extra in directory.iterdir():    # keep what others wrote there (model card, train state), linked:
            if not (tmp / extra.name).exists() and not _is_weights(extra.name):   # the originals stay put
                if extra.is_dir():
                    shutil.copytree(extra, tmp / extra.name, copy_function=_link_or_copy)
                else:
                    _link_or_copy(extra, tmp / extra.name)
        shutil.rmtree(old, ignore_errors=True)
        # two renames: a crash between them leaves both whole folders, which recover_swap puts back
        os.replace(directory, old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.replace(tmp, directory)
    except FileNotFoundError:            # a load in between put it back already (recover_swap)
        if not (directory / "config.json").exists():
            raise
    shutil.rmtree(old, ignore_errors=True)


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:                      # a file system without hard links
        shutil.copy2(src, dst)


def check_writable_folder(directory: str | Path) -> Path:
    """`directory` resolved, if save_model may write a model there; CheckpointError if not: a save
    replaces the folder, so neither the root nor the folder the process works in (or one above it)."""
    directory = Path(directory).resolve()
    if not directory.name:
        raise CheckpointError(f"cannot write a model over {directory}: name a folder for it")
    if Path.cwd() == directory or directory in Path.cwd().parents:
        raise CheckpointError(f"cannot write a model into {directory}: it is the folder you are working in (or "
                              "holds it), which each save replaces; name another folder")
    return directory


def _swap_folders(directory: Path) -> tuple[Path, Path]:
    """(DIR.tmp, DIR.old): where save_model writes the new version, and where the previous one goes."""
    return directory.with_name(directory.name + ".tmp"), directory.with_name(directory.name + ".old")


def recover_swap(directory: Path) -> None:
    """Put back a checkpoint folder that a save stopped between its two renames (save_model): the
    folder is gone, its new version is DIR.tmp and its previous one DIR.old."""
    directory = Path(directory).resolve()
    if directory.name and not directory.exists():
        for left in _swap_folders(directory):
            if left.is_dir() and _complete(left):
                os.replace(left, directory)
                return


def _complete(directory: Path) -> bool:
    try:
        return not missing_files(directory)
    except (OSError, ValueError, CheckpointError):
        return False


def missing_files(directory: Path) -> list[str]:
    """The files a checkpoint in `directory` needs and lacks (config, every weight file, tokenizer)."""
    return [name for name in ("config.json", *weight_files(directory), "tokenizer.json")
            if not (directory / name).is_file()]


def _is_weights(name: str) -> bool:
    return name == INDEX or (name.startswith("model") and name.endswith(".safetensors"))


# a shard file's bytes beyond its tensors' (the JSON header: names, dtypes, shapes, offsets)
SHARD_HEADER_BYTES = 64 * 1024


def _save_shards(directory: Path, state: dict[str, torch.Tensor], shard_bytes: int) -> None:
    """Tensors in order into files of at most shard_bytes (header included), and the index."""
    shards: list[dict[str, torch.Tensor]] = [{}]
    used = 0
    for name, tensor in state.items():
        size = tensor.numel() * tensor.element_size()
        if size + SHARD_HEADER_BYTES > shard_bytes:
            raise ValueError(f"tensor {name} ({size} bytes) does not fit a shard of {shard_bytes} bytes; "
                             "raise the shard size or store a smaller dtype")
        if used + size + SHARD_HEADER_BYTES > shard_bytes and shards[-1]:
            shards.append({})
            used = 0
        shards[-1][name] = tensor
        used += size
    weight_map, total = {}, 0
    for i, shard in enumerate(shards, 1):
        name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(directory / name), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(shard, name))
        total += sum(t.numel() * t.element_size() for t in shard.values())
    (directory / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")


def weight_files(directory: Path) -> list[str]:
    """The names of a checkpoint's weight files: model.safetensors, or the index and its shards."""
    directory = Path(directory)
    if (directory / "model.safetensors").is_file() or not (directory / INDEX).is_file():
        return ["model.safetensors"]
    return [INDEX, *sorted(set(_index(directory).values()))]


def _index(directory: Path) -> dict[str, str]:
    """The index's weight_map (tensor -> shard file); CheckpointError if it is unreadable or names a
    file outside the directory."""
    try:
        weight_map = json.loads((directory / INDEX).read_text())["weight_map"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{directory}/{INDEX} is not a safetensors index ({err}); re-export the checkpoint") from err
    check_weight_map(directory / INDEX, weight_map, "re-export the checkpoint")
    return weight_map


def check_weight_map(index: Path, weight_map, remedy: str) -> None:
    """CheckpointError unless a shard index's weight_map maps tensor names to safetensors files in the
    index's own directory (spanfill's checkpoints and the public ones alike)."""
    if not isinstance(weight_map, dict) or not all(isinstance(k, str) and isinstance(f, str) for k, f in weight_map.items()):
        raise CheckpointError(f"{index}: weight_map must map tensor names to shard file names; {remedy}")
    bad = sorted({f for f in weight_map.values() if Path(f).name != f or not f.endswith(".safetensors")})
    if bad:
        raise CheckpointError(f"{index} names shard files outside the directory: {', '.join(bad[:3])}; {remedy}")


def _read_weights(directory: Path) -> dict[str, torch.Tensor]:
    if (directory / "model.safetensors").is_file() or not (directory / INDEX).is_file():
        return load_file(str(directory / "model.safetensors"))
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(set(_index(directory).values())):
        state.update(load_file(str(directory / shard)))
    return state


def load_config(directory: Path) -> ModelConfig:
    try:
        return ModelConfig.from_json(json.loads((Path(directory) / "config.json").read_text()))
    except (json.JSONDecodeError, TypeError, ValueError) as err:
        raise CheckpointError(f"{directory}/config.json is not a valid spanfill config ({err}); "
                              "re-export the checkpoint or point --model at another directory") from err


def load_model(directory: str | Path | None = None, device: str | torch.device = "cpu",
               dtype: torch.dtype = torch.float32) -> tuple[SpanfillModel, Tokenizer]:
    directory = Path(directory) if directory else DEFAULT_MODEL_DIR
    recover_swap(directory)
    if directory.is_file():
        raise CheckpointError(f"model {directory} is a file; pass the directory holding it ({', '.join(REQUIRED)})")
    if not directory.is_dir():
        raise CheckpointError(f"model directory {directory} does not exist; pass a directory holding "
                              f"{', '.join(REQUIRED)} (or train one with `spanfill train`)")
    if missing := missing_files(directory):
        raise CheckpointError(f"model directory {directory} lacks {', '.join(missing)}; it is not a complete spanfill checkpoint")
    cfg = load_config(directory)
    try:
        tok = Tokenizer.from_file(directory / "tokenizer.json")
    except Exception as err:  # tokenizers raises bare Exceptions for corrupt JSON
        raise CheckpointError(f"{directory}/tokenizer.json cannot be read ({err})") from err
    try:
        state = _read_weights(directory)
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"the weights in {directory} ({', '.join(weight_files(directory))}) are truncated or corrupt ({err}); "
                              "restore it from the release or retrain") from err
    layers = {key.split(".")[1] for key in state if key.startswith("layers.")}
    embed = tuple(state["embed.weight"].shape) if "embed.weight" in state else None
    if len(layers) != cfg.n_layers or embed != (cfg.vocab_size, cfg.dim):    # before building that many blocks
        raise CheckpointError(f"{directory}/model.safetensors does not match config.json: {len(layers)} layers and "
                              f"an embedding of {embed}, where the config says {cfg.n_layers} and "
                              f"{(cfg.vocab_size, cfg.dim)}")
    with torch.device("meta"):     # the config's sizes meet the weights before anything of theirs is allocated
        model = SpanfillModel(cfg)
    try:     # copies: the read tensors map the file, which a later write over it would change under the model
        model.load_state_dict({key: tensor.clone() for key, tensor in state.items()}, strict=True, assign=True)
    except RuntimeError as err:
        raise CheckpointError(f"{directory}/model.safetensors does not match config.json: {err}") from err
    if tok.vocab_size > cfg.vocab_size:
        raise CheckpointError(f"tokenizer has {tok.vocab_size} tokens but the model only {cfg.vocab_size}")
    model.rope_cos, model.rope_sin = torch.empty(0), torch.empty(0)     # the meta ones: set below
    model = model.to(device=device, dtype=dtype).eval()
    model.rope_cos, model.rope_sin = (t.to(device) for t in rope_tables(cfg))  # keep rotary tables fp32
    return model, tok
