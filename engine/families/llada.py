"""LLaDA-8B (GSAI-ML/LLaDA-8B-Base, -Instruct; ML-GSAI/LLaDA): our own port of its Llama-like
transformer, under its own tensor names, so its safetensors load without renaming.

The checkpoint's config.json carries OLMo's keys (d_model, n_layers, mlp_hidden_size, ...) and its
tensors sit under model.transformer.{wte, blocks.N.*, ln_f, ff_out}. A block is a Llama block:
RMSNorm, rotate-half RoPE (angles and rotation in float32, as OLMo's `rope_full_precision`), no
biases, SwiGLU with ff_proj as the gate, up_proj as the up projection and ff_out as the down
projection; attn_out is the output projection. No causal mask and no logits shift.
tests/engine/test_families.py checks this port against transformers' stock LlamaForCausalLM with
the weights renamed.

Infill prompt: `<|startoftext|> + prefix + masks + suffix` is a GUESS (LLaDA publishes no infill code;
its generate.py prepends bos to every prompt).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core.checkpoint import CheckpointError
from .common import Family, Shape

# config values this port implements; a checkpoint that says otherwise is a variant it would run wrongly
EXPECTED = {"block_type": "llama", "layer_norm_type": "rms", "activation_type": "silu", "include_bias": False,
            "include_qkv_bias": False, "alibi": False, "rope": True, "attention_layer_norm": False,
            "scale_logits": False, "input_emb_norm": False}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE in float32. x: [B, H, N, hd]; cos/sin: [B|1, 1, N, hd]."""
    h = x.float()
    half = h.shape[-1] // 2
    turned = torch.cat((-h[..., half:], h[..., :half]), dim=-1)
    return (h * cos + turned * sin).to(x.dtype)


class Block(nn.Module):
    def __init__(self, d: int, heads: int, kv_heads: int, hidden: int, eps: float):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.attn_norm, self.ff_norm = RMSNorm(d, eps), RMSNorm(d, eps)
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.attn_out = nn.Linear(heads * self.head_dim, d, bias=False)
        self.ff_proj = nn.Linear(d, hidden, bias=False)     # the SwiGLU gate
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.ff_out = nn.Linear(hidden, d, bias=False)

    def forward(self, x, cos, sin, mask, cache, index: int) -> torch.Tensor:
        B, N, _ = x.shape                                                   # x: [B, N, D]
        h = self.attn_norm(x)
        q = self.q_proj(h).view(B, N, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(B, N, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(B, N, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, index)                               # [B, kvH, K, hd]
        if self.kv_heads != self.heads:
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=False)
        x = x + self.attn_out(a.transpose(1, 2).reshape(B, N, -1))
        h = self.ff_norm(x)
        return x + self.ff_out(F.silu(self.ff_proj(h)) * self.up_proj(h))


class LLaDABackbone(nn.Module):
    """The whole model; `self.model.transformer` mirrors the checkpoint's tensor names."""

    def __init__(self, config: dict, where: str = "checkpoint"):
        super().__init__()
        for key, want in EXPECTED.items():
            if key in config and config[key] is not None and config[key] != want:
                raise CheckpointError(f"{where}/config.json has {key}={config[key]!r}; spanfill's LLaDA port "
                                      f"implements {key}={want!r} only (LLaDA-8B's value)")
        missing = [k for k in ("d_model", "n_heads", "n_layers") if k not in config]
        if missing:
            raise CheckpointError(f"{where}/config.json lacks {', '.join(missing)}; it does not describe a LLaDA model")
        d, heads, layers = config["d_model"], config["n_heads"], config["n_layers"]
        kv_heads = config.get("n_kv_heads") or heads
        hidden = config.get("mlp_hidden_size") or int(config.get("mlp_ratio", 4) * d)
        vocab = config.get("embedding_size") or config["vocab_size"]
        eps = float(config.get("rms_norm_eps", 1e-5))
        self.theta = float(config.get("rope_theta", 10000.0))
        self.tie = bool(config.get("weight_tying", False))
        with torch.device("meta"):
            self.model = nn.Module()
            self.model.transformer = nn.ModuleDict({
                "wte": nn.Embedding(vocab, d),
                "blocks": nn.ModuleList(Block(d, heads, kv_heads, hidden, eps) for _ in range(layers)),
                "ln_f": RMSNorm(d, eps),
            })
            if not self.tie:
                self.model.transformer["ff_out"] = nn.Linear(d, vocab, bias=False)
        self.shape = Shape(layers=layers, kv_heads=kv_heads, head_dim=d // heads, vocab_size=vocab,
                           max_positions=int(config.get("max_sequence_length", 4096)))
        self.register_buffer("inv_freq", torch.empty(d // heads // 2, device="meta"), persistent=False)

    @property
    def module(self) -> nn.Module:
        return self

    def tied_names(self) -> None:
        return None                      # a tied LLaDA has no head tensor at all: logits() uses wte

    def ready(self, device: torch.device) -> None:
        hd = self.shape.head_dim
        self.inv_freq = 1.0 / (self.theta ** (torch.arange(0, hd, 2, dtype=torch.float32, device=device) / hd))
        self.eval().requires_grad_(False)

    def hidden(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None, cache=None) -> torch.Tensor:
        t = self.model.transformer
        x = t["wte"](ids)
        angles = positions.float()[..., None] * self.inv_freq                  # [B|1, N, hd/2], float32
        angles = torch.cat((angles, angles), dim=-1)[:, None]
        cos, sin = angles.cos(), angles.sin()
        for i, block in enumerate(t["blocks"]):
            x = block(x, cos, sin, mask, cache, i)
        return t["ln_f"](x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        t = self.model.transformer
        return F.linear(hidden, t["wte"].weight) if self.tie else t["ff_out"](hidden)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def build(config: dict, where: str) -> LLaDABackbone:
    return LLaDABackbone(config, where)


LLADA = Family(
    name="llada", masks=("<|mdm_mask|>",), bos="<|startoftext|>", eos=None,
    ends=("<|endoftext|>", "<|eot_id|>"), shifted=False, build=build,
    note="infill prompt bos + prefix + masks + suffix is a GUESS (LLaDA publishes no infill code)")


def matches(config: dict) -> bool:
    return str(config.get("model_type", "")).lower() == "llada" or "LLaDAModelLM" in (config.get("architectures") or [])
