"""The Dream family: Dream-v0-Base-7B, Dream-Coder-v0-7B, DiffuCoder-7B (Base, Instruct, cpGRPO) and
DreamOn-v0-7B (DreamLM/Dream, DreamLM/DreamOn, apple/ml-diffucoder).

config.json says model_type "Dream" / DreamModel with `auto_map` remote code; the weights are in
Qwen2ForCausalLM's layout (q/k/v biases, untied lm_head), so they run in the stock class,
bidirectionally. Logits are shifted as in an AR model (the output at i-1 predicts token i). The
infill prompt is `<|beginoftext|> + prefix + masks + suffix + <|endoftext|>` (DreamOn's quickstart
and infilling generator; the tokenizer's bos, not config.json's bos_token_id). Dream-v0, Dream-Coder
and DiffuCoder publish no infill code: the same layout is assumed for them (GUESS).

DreamOn adds `<|expand|>` (a committed one turns its mask into two) and uses `<|endoftext|>` inside
the span as "delete" (its position is removed): variable-length infilling (length.py).
"""
from __future__ import annotations

from .common import Family
from .stock import StockBackbone


def build(config: dict, where: str) -> StockBackbone:
    return StockBackbone(config, "qwen2", tie=bool(config.get("tie_word_embeddings", False)), where=where)


DREAM = Family(
    name="dream", masks=("<|mask|>",), bos="<|beginoftext|>", eos="<|endoftext|>",
    ends=("<|endoftext|>", "<|im_end|>", "<|dlm_pad|>"), shifted=True, build=build,
    note="Dream-v0/Dream-Coder/DiffuCoder infill prompt is DreamOn's (GUESS: they publish no infill code)")

# GUESS: the initial span of 8 masks; DreamOn grows or shrinks it from there (up to MAX_SPAN positions)
DREAMON = Family(
    name="dreamon", masks=("<|mask|>",), bos="<|beginoftext|>", eos="<|endoftext|>",
    ends=("<|endoftext|>",), shifted=True, build=build, expand="<|expand|>", delete="<|endoftext|>",
    span_length=8, steps=8,
    note="DreamOn's commit schedule under expansion is a GUESS (one expansion per committed <|expand|>)")


def matches(config: dict) -> bool:
    return str(config.get("model_type", "")).lower() == "dream" or "DreamModel" in (config.get("architectures") or [])
