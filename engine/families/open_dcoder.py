"""Open-dCoder-0.5B (fredzzp/open-dcoder-0.5B; pengzhangzhi/Open-dLLM): Qwen2.5-Coder-0.5B continued
as a masked diffusion model. The checkpoint is a plain Qwen2ForCausalLM (model_type "qwen2", tied
head) whose tokenizer gained a mask token, `<M>` (its training script adds it; its infill evaluation
falls back to `[MASK]`): the mask id comes from the tokenizer files, config.json has none. A Qwen2
checkpoint whose tokenizer has no mask token is an autoregressive model, not this one.

Run bidirectionally, logits shifted, infill prompt `prefix + masks + suffix` with no bos and no eos
(eval_infill.py). The on-disk layout is a GUESS from the publisher's code: the HF repository itself
could not be read.
"""
from __future__ import annotations

from .common import Family
from .stock import StockBackbone


def build(config: dict, where: str) -> StockBackbone:
    return StockBackbone(config, "qwen2", tie=bool(config.get("tie_word_embeddings", True)), where=where)


OPEN_DCODER = Family(
    name="open-dcoder", masks=("<M>", "[MASK]"), bos=None, eos=None,
    ends=("<|endoftext|>",), shifted=True, build=build,
    note="the checkpoint layout is a GUESS from the publisher's code")


def matches(config: dict) -> bool:
    return str(config.get("model_type", "")).lower() == "qwen2" or "Qwen2ForCausalLM" in (config.get("architectures") or [])
