"""What every public-checkpoint family shares: the `Family` description (special tokens by name,
infill prompt layout, logits shift, how its backbone is built), reading config.json, and loading
safetensors weights, sharded or not, into a backbone.

Only safetensors are read (never a pickle) and no file from the checkpoint is executed: the
publishers' `auto_map` remote code is ignored, their weights go into transformers' stock classes
or our own port. Every way a directory can be unusable raises the engine's `CheckpointError` with
one line that names the file and what to do.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

import torch
from safetensors import SafetensorError, safe_open

from ..core.checkpoint import CheckpointError, check_weight_map

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"


class Backbone(Protocol):
    """The forward pass the diffusion engine drives. `cache` receives every layer's keys/values
    (dual_cache.py); `mask` is None (full attention) or a [B|1, 1, N, K] bool mask of the keys
    each query may see."""
    shape: "Shape"

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None,
               cache=None) -> torch.Tensor: ...       # [B, N] -> [B, N, D]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor: ...   # [..., D] -> [..., V]

    def num_params(self) -> int: ...

    def ready(self, device: torch.device) -> None: ...   # after the weights are in: rotary tables, eval mode


@dataclass(frozen=True)
class Shape:
    """What the engine needs to know of a backbone's sizes (cache buffers, limits)."""
    layers: int
    kv_heads: int
    head_dim: int
    vocab_size: int
    max_positions: int


@dataclass(frozen=True)
class Family:
    """One publisher's checkpoint family, as its own code runs it.

    Tokens are named by their strings and looked up in the checkpoint's tokenizer, never by id:
    the ids differ between releases (and in the tests' tiny replicas)."""
    name: str
    masks: tuple[str, ...]            # the mask token: the first of these the tokenizer holds
    bos: str | None                   # prepended to the infill prompt
    eos: str | None                   # appended after the suffix
    ends: tuple[str, ...]             # tokens that end a completion (eos, pad)
    shifted: bool                     # logits[i] come from the output at i-1, as in an AR model
    build: Callable[[dict, str], "Backbone"]   # (config.json, where) -> the backbone on the meta device
    expand: str | None = None         # DreamOn: a committed <|expand|> turns one mask into two
    delete: str | None = None         # DreamOn: a committed delete token removes its position
    span_length: int = 32             # default L (DreamOn: the initial length, which then changes)
    steps: int = 4                    # default T
    note: str = ""                    # what is a GUESS about this family (shown in errors and docs)

    def infill(self, prefix: list[int], span: list[int], suffix: list[int], bos: int | None,
               eos: int | None) -> tuple[list[int], int]:
        """The prompt `bos + prefix + span + suffix + eos` (bos and eos where the family has them,
        by the ids of its `bos`/`eos` strings) and where the span starts in it."""
        head = ([bos] if self.bos else []) + prefix
        return head + span + suffix + ([eos] if self.eos else []), len(head)


def read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent} has no {path.name}; it is not a model checkpoint directory") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CheckpointError(f"{path} is not valid JSON ({err}); download {what} again") from err
    if not isinstance(data, dict):
        raise CheckpointError(f"{path} holds no JSON object; download {what} again")
    return data


def weight_map(directory: Path) -> dict[str, Path]:
    """tensor name -> the safetensors file holding it, from the shard index or the single file."""
    index = directory / INDEX
    if index.is_file():
        mapping = read_json(index, "the index").get("weight_map")
        if not isinstance(mapping, dict) or not mapping:
            raise CheckpointError(f"{index} has no weight_map; download the index again")
        check_weight_map(index, mapping, "download the index again")
        shards = sorted(set(mapping.values()))
        missing = [s for s in shards if not (directory / s).is_file()]
        if missing:
            raise CheckpointError(f"{directory} lacks {len(missing)} of its {len(shards)} weight shards "
                                  f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}); "
                                  "the download is incomplete: fetch the missing files")
        return {name: directory / shard for name, shard in mapping.items()}
    if (directory / SINGLE).is_file():
        try:
            with safe_open(str(directory / SINGLE), framework="pt") as fh:
                return {name: directory / SINGLE for name in fh.keys()}
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{directory / SINGLE} is truncated or corrupt ({err}); download it again") from err
    pickled = sorted(p.name for p in directory.glob("*.bin")) + sorted(p.name for p in directory.glob("*.pt"))
    if pickled:
        raise CheckpointError(f"{directory} holds only pickled weights ({pickled[0]}); spanfill loads safetensors "
                              "only: download the checkpoint's *.safetensors files instead")
    raise CheckpointError(f"{directory} has neither {SINGLE} nor {INDEX}; it holds no weights spanfill can load")


def read_weights(directory: Path, dtype: torch.dtype, device: torch.device,
                 rename: Callable[[str], str | None] = lambda name: name) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint as `dtype` on `device`, shard by shard (a 7B model never sits
    in memory twice). rename(name) -> the backbone's name for it, or None to skip it."""
    by_file: dict[Path, list[str]] = {}
    for name, path in weight_map(directory).items():
        by_file.setdefault(path, []).append(name)
    state = {}
    for path, names in by_file.items():
        try:
            with safe_open(str(path), framework="pt", device="cpu") as fh:
                present = set(fh.keys())
                absent = [n for n in names if n not in present]
                if absent:
                    raise CheckpointError(f"{path} lacks {absent[0]} that {INDEX} places there; download it again")
                for name in names:
                    target = rename(name)
                    if target is not None:
                        state[target] = fh.get_tensor(name).to(device=device, dtype=dtype)
        except (SafetensorError, OSError) as err:
            raise CheckpointError(f"{path} is truncated or corrupt ({err}); download it again") from err
    return state


def load_weights(module: torch.nn.Module, state: dict[str, torch.Tensor], directory: Path) -> None:
    """Assign `state` to a module built on the meta device; names and shapes must match exactly."""
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    extra = [k for k in state if k not in own]
    if missing or extra:
        what = (f"lacks {missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")) if missing \
            else f"has {extra[0]} that its config.json does not describe"
        raise CheckpointError(f"the weights in {directory} do not match the family's layout: the checkpoint {what}")
    for name, tensor in state.items():
        if tuple(own[name].shape) != tuple(tensor.shape):
            raise CheckpointError(f"{directory}: {name} has shape {tuple(tensor.shape)} but config.json implies "
                                  f"{tuple(own[name].shape)}; the config and the weights are from different models")
    module.load_state_dict(state, strict=True, assign=True)


def random_weights(module: torch.nn.Module, device: torch.device, dtype: torch.dtype, seed: int = 0) -> None:
    """Materialise a meta-device module with random weights in place (benchmarks: latency does not
    depend on the values). Norm weights (the 1-D weights) become ones so activations stay finite
    at any depth."""
    module.to_empty(device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1 and name.endswith("weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=gen)
    module.to(dtype)
