"""Which family a checkpoint directory is, from its own files, and loading it.

config.json's model_type / architectures name the family; the tokenizer files supply the special
tokens, which are looked up by their strings (and checked against config.json's ids where it has
them). A checkpoint is never loaded through `auto_map`: a family spanfill does not implement is
refused even though its remote code could run it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..core.checkpoint import CheckpointError
from . import coda, dream, llada, open_dcoder
from .common import Backbone, Family, load_weights, random_weights, read_json, read_weights
from .hub import looks_like_hub_id, resolve
from .tokenizer import FamilyTokenizer

FAMILIES: dict[str, Family] = {f.name: f for f in (dream.DREAM, dream.DREAMON, open_dcoder.OPEN_DCODER,
                                                    coda.CODA, llada.LLADA)}
SUPPORTED = "Dream / Dream-Coder / DiffuCoder / DreamOn, Open-dCoder, CoDA, LLaDA"
MATCHERS = ((dream.matches, "dream"), (coda.matches, "coda"), (llada.matches, "llada"),
            (open_dcoder.matches, "open-dcoder"))


@dataclass(frozen=True)
class Special:
    mask: int
    bos: int | None
    eos: int | None
    ends: tuple[int, ...]                 # the first is the one committed end positions are written as
    expand: int | None = None
    delete: int | None = None
    banned: tuple[int, ...] = ()          # never proposed inside a span: mask, bos, the other control tokens


@dataclass
class Checkpoint:
    directory: Path
    family: Family
    config: dict
    tokenizer: FamilyTokenizer
    special: Special


def locate(path, download: bool = False) -> Path:
    directory = Path(path)
    if directory.is_dir():
        return directory
    if looks_like_hub_id(str(path)):
        return resolve(str(path), download=download)
    raise CheckpointError(f"model directory {path} does not exist")


def family_of(directory: Path, config: dict) -> Family:
    """The family config.json names (the Dream family before its tokenizer says whether it is DreamOn)."""
    for matches, name in MATCHERS:
        if matches(config):
            return FAMILIES[name]
    kind = ", ".join(config.get("architectures") or []) or config.get("model_type") or "unnamed"
    if config.get("auto_map"):
        raise CheckpointError(f"{directory}: architecture {kind} exists only as the publisher's remote code "
                              f"(auto_map), which spanfill never runs; it serves {SUPPORTED}")
    raise CheckpointError(f"{directory}: model_type {config.get('model_type')!r} ({kind}) is not a model family "
                          f"spanfill serves; it serves {SUPPORTED} and its own checkpoints")


def special_ids(directory: Path, family: Family, config: dict, tok: FamilyTokenizer) -> Special:
    mask = next((tok.token_id(m) for m in family.masks if tok.token_id(m) is not None), None)
    if mask is None:
        hint = (" (a Qwen2 checkpoint without one is an autoregressive model, not a diffusion one)"
                if family.name == "open-dcoder" else "")
        raise CheckpointError(f"the tokenizer in {directory} has no mask token {' or '.join(map(repr, family.masks))}; "
                              f"{family.name} denoises masks and cannot run without it{hint}")
    if config.get("mask_token_id") is not None and config["mask_token_id"] != mask:
        raise CheckpointError(f"{directory}: config.json says mask_token_id {config['mask_token_id']} but the tokenizer "
                              f"has {family.masks[0]!r} at {mask}; the tokenizer files belong to another model")

    def need(token: str | None) -> int | None:
        if token is None:
            return None
        tid = tok.token_id(token)
        if tid is None:
            raise CheckpointError(f"the tokenizer in {directory} lacks {token!r}, which {family.name}'s prompt needs")
        return tid

    bos, eos = need(family.bos), need(family.eos)
    ends = tuple(t for t in (tok.token_id(e) for e in family.ends) if t is not None)
    if not ends:
        raise CheckpointError(f"the tokenizer in {directory} has none of {family.name}'s end tokens {family.ends}")
    expand, delete = need(family.expand), need(family.delete)
    control = {tid for tid, added in tok.hf.get_added_tokens_decoder().items() if added.special}
    banned = sorted((control | {mask} | ({bos} if bos is not None else set())) - set(ends) - {delete})
    if family.expand:
        banned.remove(expand)
    return Special(mask, bos, eos, ends, expand, delete, tuple(banned))


def open_checkpoint(path, download: bool = False) -> Checkpoint:
    """Detect and check everything but the weights (cheap: no tensor is read)."""
    directory = locate(path, download)
    config = read_json(directory / "config.json", "config.json")
    if config.get("model_type") == "spanfill":
        raise CheckpointError(f"{directory} is a spanfill checkpoint; load it with Engine.load")
    family = family_of(directory, config)
    tokenizer = FamilyTokenizer.from_directory(directory)
    if family is dream.DREAM and tokenizer.token_id(dream.DREAMON.expand) is not None:
        family = dream.DREAMON
    return Checkpoint(directory, family, config, tokenizer, special_ids(directory, family, config, tokenizer))


def build_backbone(ckpt: Checkpoint, device: torch.device, dtype: torch.dtype, weights: str = "checkpoint") -> Backbone:
    """The family's backbone with the checkpoint's weights, or random ones (weights="random")."""
    try:
        backbone = ckpt.family.build(ckpt.config, str(ckpt.directory))
    except CheckpointError:
        raise
    except Exception as err:     # a value of the wrong type or size, found by transformers or the arithmetic
        raise CheckpointError(f"{ckpt.directory}/config.json cannot build a {ckpt.family.name} model: "
                              f"{type(err).__name__}: {err}") from err
    sizes = asdict(backbone.shape)
    if bad := {k: v for k, v in sizes.items() if not isinstance(v, int) or v < 1}:
        raise CheckpointError(f"{ckpt.directory}/config.json gives a {ckpt.family.name} model "
                              f"{', '.join(f'{k}={v!r}' for k, v in bad.items())}: each must be a positive integer")
    if weights == "random":
        random_weights(backbone.module, device, dtype)
    else:
        state = read_weights(ckpt.directory, dtype, device)
        tied = backbone.tied_names()
        if tied is not None:
            head, embedding = tied
            state.pop(head, None)          # a tied head may be stored as a copy; the embedding is the truth
            if embedding in state:
                state[head] = state[embedding]
        load_weights(backbone.module, state, ckpt.directory)
    backbone.ready(device)
    if ckpt.tokenizer.vocab_size > backbone.shape.vocab_size:
        raise CheckpointError(f"the tokenizer in {ckpt.directory} has {ckpt.tokenizer.vocab_size} tokens but the "
                              f"model only {backbone.shape.vocab_size} rows; the files belong to different models")
    return backbone
