"""The spanfill transformer: a Llama-shaped decoder (RoPE, RMSNorm, SwiGLU, tied embeddings) with
three entry points that share one set of weights and differ only in what attends to what (DESIGN §3):

* `forward_train`  — full training sequence with an explicit attention mask (context causal,
                     clean middle causal, noised span bidirectional over itself + context).
* `encode_context` — causal encoding of new context tokens against an exact KV cache.
* `span_step`      — one denoising step: L span tokens (B candidates) attend bidirectionally to each
                     other and to the whole cached context. Cost O(L·(C+L)), no state is written.

Because the context is causal, its keys/values never depend on the span or on anything after them,
so caching them is exact.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig


def rope_tables(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim))
    t = torch.arange(cfg.max_positions, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)                      # [P, Dh/2]
    emb = torch.cat([freqs, freqs], dim=-1)               # [P, Dh] (rotate-half layout, as Llama)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [B, H, S, Dh]; cos/sin: [B or 1, 1, S, Dh] already in x.dtype
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def biased_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Attention as explicit products: q, k, v [B, H, S, Dh]; bias [B, 1, S, S] added to the scores
    (0 where a query may attend, -inf where not). The training path on the CPU: there the SDPA kernel
    under an arbitrary mask computes every block anyway, well below matmul speed, while compiled this
    form is one GEMM that adds the bias, a fused softmax and one GEMM (benchmarks/train_throughput.py
    times both)."""
    B, H, S, Dh = q.shape
    scores = torch.baddbmm(bias.expand(B, H, S, S).reshape(B * H, S, S), q.reshape(B * H, S, Dh),
                           k.reshape(B * H, S, Dh).transpose(1, 2), alpha=Dh ** -0.5)
    return torch.bmm(torch.softmax(scores, dim=-1), v.reshape(B * H, S, Dh)).view(B, H, S, Dh)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.wqkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def qkv(self, x, cos, sin):
        B, S, _ = x.shape
        q, k, v = self.wqkv(x).view(B, S, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v   # each [B, H, S, Dh]

    def out(self, y):
        B, H, S, Dh = y.shape
        return self.wo(y.transpose(1, 2).reshape(B, S, H * Dh))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w13 = nn.Linear(cfg.dim, 2 * cfg.ffn_dim, bias=False)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x):
        gate, up = self.w13(x).chunk(2, dim=-1)
        return self.w2(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        self.mlp = MLP(cfg)


class SpanfillModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim, eps=cfg.norm_eps)
        # the vocabulary projection, when it is not the tied embedding's fp32 matmul (quantize.py)
        self.head: nn.Module | None = None
        # the middle's length in tokens, predicted from <|middle|>'s hidden state (config.length_classes)
        self.length_head = nn.Linear(cfg.dim, cfg.length_classes, bias=True) if cfg.length_classes else None
        cos, sin = rope_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init)
        for block in self.layers:  # GPT-2 scaled init of residual projections
            nn.init.normal_(block.attn.wo.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))
            nn.init.normal_(block.mlp.w2.weight, std=0.02 / math.sqrt(2 * cfg.n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def _rope(self, positions: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        # positions: [S] or [B, S] -> [B|1, 1, S, Dh]
        if positions.dim() == 1:
            positions = positions[None]
        return (self.rope_cos[positions][:, None].to(dtype), self.rope_sin[positions][:, None].to(dtype))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        if self.head is not None:
            return self.head(self.norm(h))
        return F.linear(self.norm(h), self.embed.weight)

    def add_length_head(self, classes: int) -> None:
        """Give a trained model a length head of `classes` classes, initialised as at construction."""
        self.cfg.length_classes = classes
        self.length_head = nn.Linear(self.cfg.dim, classes, bias=True).to(self.embed.weight.device)
        self._init(self.length_head)

    def length_logits(self, h: torch.Tensor) -> torch.Tensor:
        """h: [B, D] hidden state at <|middle|> -> [B, K] logits over the middle's token count."""
        if self.length_head is None:
            raise ValueError("this model has no length head (config.length_classes = 0)")
        return self.length_head(self.norm(h))

    def allocate_kv(self, capacity: int, batch: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The one KV allocator: per layer a (keys, values) pair, each [batch, H, capacity, Dh], zeroed,
        in the weights' dtype and device (the context cache, the compiled steps' scratch and the CUDA
        path's static buffers all take theirs from here)."""
        cfg, w = self.cfg, self.embed.weight
        shape = (batch, cfg.n_heads, capacity, cfg.head_dim)
        return [(torch.zeros(shape, dtype=w.dtype, device=w.device), torch.zeros(shape, dtype=w.dtype, device=w.device))
                for _ in range(cfg.n_layers)]

    def blocks(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attend) -> torch.Tensor:
        """The one block loop. x: [B, S, D] -> [B, S, D]; attend(layer, q, k, v) -> [B, H, S, Dh] is
        where the entry points differ: what each layer's queries see, and which keys/values it keeps."""
        for i, block in enumerate(self.layers):
            q, k, v = block.attn.qkv(block.attn_norm(x), cos, sin)
            x = x + block.attn.out(attend(i, q, k, v))
            x = x + block.mlp(block.mlp_norm(x))
        return x

    # ---- training ------------------------------------------------------------------------------
    def forward_train(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """tokens/positions: [B, S]; mask: [B, 1, S, S] bool (True = may attend). Returns logits [B, S, V]."""
        return self.logits(self.hidden_train(tokens, positions, mask))

    def hidden_train(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                     fused_attention: bool | None = None) -> torch.Tensor:
        """`forward_train`'s final hidden states [B, S, D], before any head. fused_attention: the SDPA
        kernel under the mask (default on CUDA) or `biased_attention` (default on the CPU)."""
        x = self.embed(tokens)
        cos, sin = self._rope(positions, x.dtype)
        if fused_attention is None:
            fused_attention = x.device.type == "cuda"
        if fused_attention:
            def attend(i, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            dtype = torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type) else x.dtype
            bias = torch.zeros(mask.shape, dtype=dtype, device=x.device).masked_fill(~mask, float("-inf"))

            def attend(i, q, k, v):
                return biased_attention(q, k, v, bias)
        return self.blocks(x, cos, sin, attend)

    # ---- inference -----------------------------------------------------------------------------
    def encode_context(self, tokens: torch.Tensor, start: int, kv: list[tuple[torch.Tensor, torch.Tensor]],
                       every: bool = False) -> torch.Tensor:
        """Encode new context tokens [1, N] at positions start..start+N-1, writing their keys/values
        into the per-layer buffers kv[i] = (k, v), each [1, H, capacity, Dh]. Returns the hidden state
        of the last new token [1, D] (its logits predict the next token: the AR path), or with
        `every` those of all N [N, D] (each predicts the token after it: checking a draft, check.py)."""
        N = tokens.shape[1]
        end = start + N
        x = self.embed(tokens)
        cos, sin = self._rope(torch.arange(start, end, device=tokens.device), x.dtype)
        # from position 0 the mask is plain causal: is_causal spares the kernel an N x N mask. Branches,
        # not `causal = N > 1 and ...`: compiled with dynamic shapes that expression is a symbolic
        # bool, which SDPA rejects (a graph break).
        mask, causal = None, False
        if N > 1 and start > 0:  # new query i (absolute start+i) sees every cached key and new keys j <= i
            mask = torch.ones(N, end, dtype=torch.bool, device=tokens.device).tril(diagonal=start)
        elif N > 1:
            causal = True

        def attend(i, q, k, v):
            kbuf, vbuf = kv[i]
            kbuf[:, :, start:end] = k
            vbuf[:, :, start:end] = v
            return F.scaled_dot_product_attention(q, kbuf[:, :, :end], vbuf[:, :, :end], attn_mask=mask, is_causal=causal)
        h = self.blocks(x, cos, sin, attend)
        return h[0] if every else h[:, -1]

    def span_step(self, span: torch.Tensor, context_len: int, kv: list[tuple[torch.Tensor, torch.Tensor]],
                  positions: torch.Tensor | None = None, key_mask: torch.Tensor | None = None) -> torch.Tensor:
        """One denoising forward pass. span: [B, L] token ids (masks included); the span follows the
        first context_len cached positions and attends to all of them and to itself. Returns final
        hidden states [B, L, D]; `logits` turns them into predictions.

        Static shapes (the CUDA graphs): context_len is then the bucket's capacity, positions [L] the
        span's real RoPE positions and key_mask [context_len + L] bool hides the bucket's unused keys."""
        B, L = span.shape
        end = context_len + L
        x = self.embed(span)
        if positions is None:
            positions = torch.arange(context_len, end, device=span.device)
        cos, sin = self._rope(positions, x.dtype)
        attn_mask = None if key_mask is None else key_mask.view(1, 1, 1, -1)
        # one candidate: the span's keys/values go into the buffers' scratch room after the context
        # (never read as context), so no step copies the cached context
        in_place = B == 1 and kv[0][0].shape[2] >= end

        def attend(i, q, k, v):
            kbuf, vbuf = kv[i]
            if in_place:
                kbuf[:, :, context_len:end] = k
                vbuf[:, :, context_len:end] = v
                keys, values = kbuf[:, :, :end], vbuf[:, :, :end]
            else:
                keys = torch.cat([kbuf[:, :, :context_len].expand(B, -1, -1, -1), k], dim=2)
                values = torch.cat([vbuf[:, :, :context_len].expand(B, -1, -1, -1), v], dim=2)
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=attn_mask)
        return self.blocks(x, cos, sin, attend)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
