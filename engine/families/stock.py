"""Qwen2- and Qwen3-layout checkpoints (the Dream family, Open-dCoder, CoDA) through transformers'
stock `Qwen2ForCausalLM` / `Qwen3ForCausalLM`, run bidirectionally.

The weights' names are the stock classes' own, so they load as they are. Bidirectional attention
is the stock attention with its `is_causal` flag off and the mask passed as already prepared
(`{"full_attention": None}` = every query sees every key), which is what the publishers' remote
code does with `is_causal=False`. Keys/values go through the engine's dual cache via the stock
`cache.update` call.
"""
from __future__ import annotations

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from ..core.checkpoint import CheckpointError
from .common import Shape

ARCHITECTURES = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
REQUIRED = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
OPTIONAL = ("num_key_value_heads", "head_dim", "rms_norm_eps", "max_position_embeddings", "attention_bias")


def stock_config(config: dict, architecture: str, where: str):
    """The stock config for a checkpoint's config.json (whatever its model_type says)."""
    missing = [k for k in REQUIRED if k not in config]
    if missing:
        raise CheckpointError(f"{where}/config.json lacks {', '.join(missing)}; it does not describe a "
                              f"{architecture} model (download config.json again)")
    if config.get("rope_scaling"):
        raise CheckpointError(f"{where}/config.json asks for rope_scaling {config['rope_scaling']!r}, which "
                              "spanfill's loader does not apply; use a checkpoint without it")
    if config.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{where}/config.json has hidden_act={config['hidden_act']!r}; the {architecture} "
                              "layout spanfill loads uses silu")
    cls, _ = ARCHITECTURES[architecture]
    kwargs = {k: config[k] for k in REQUIRED + OPTIONAL if k in config}
    if architecture == "qwen2":
        kwargs.pop("attention_bias", None)    # Qwen2's q/k/v always carry a bias
    return cls(**kwargs, rope_theta=float(config.get("rope_theta", 10000.0)), use_sliding_window=False,
               tie_word_embeddings=False, attn_implementation="sdpa")   # tying is done by hand in ready()


class StockBackbone:
    """A stock *ForCausalLM driven bidirectionally: hidden states, then the head on chosen rows only
    (the vocabulary projection is the costliest matmul of a span step with a 152k vocabulary)."""

    def __init__(self, config: dict, architecture: str, tie: bool, where: str = "checkpoint"):
        self.hf_config = stock_config(config, architecture, where)
        _, cls = ARCHITECTURES[architecture]
        with torch.device("meta"):
            self.model = cls(self.hf_config)
        self.tie = tie
        c = self.hf_config
        self.shape = Shape(layers=c.num_hidden_layers, kv_heads=c.num_key_value_heads,
                           head_dim=getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
                           vocab_size=c.vocab_size, max_positions=c.max_position_embeddings)

    @property
    def module(self) -> torch.nn.Module:
        return self.model

    def tied_names(self) -> tuple[str, str] | None:
        """(head, embedding) when the head shares the embedding's weight."""
        return ("lm_head.weight", "model.embed_tokens.weight") if self.tie else None

    def ready(self, device: torch.device) -> None:
        inner = self.model.model
        if self.tie:
            self.model.lm_head.weight = inner.embed_tokens.weight
        # the rotary tables are buffers the meta build left empty; rebuilt in float32 as the stock class makes them
        inner.rotary_emb = type(inner.rotary_emb)(self.hf_config).to(device)
        for layer in inner.layers:
            layer.self_attn.is_causal = False
        self.model.eval().requires_grad_(False)

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache=None) -> torch.Tensor:
        out = self.model.model(input_ids=ids, position_ids=positions, attention_mask={"full_attention": mask},
                               cache=cache, use_cache=False)
        return out.last_hidden_state

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.model.lm_head(hidden)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())
