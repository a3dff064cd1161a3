"""CoDA-1.7B (Salesforce/CoDA-v0-Base, -Instruct; SalesforceAIResearch/CoDA): config.json says
model_type "CoDA" / CoDALanguageModel with remote code; the weights are in Qwen3ForCausalLM's
layout (q/k RMSNorms, no biases) and run in the stock class, bidirectionally, logits shifted.

config.json has no tie_word_embeddings key (the remote config defaults to True) but the model never
ties: its lm_head is a tensor of its own, so the head is loaded untied. Tokens: `<|mask|>`, bos and
eos `<|im_end|>`, pad `<|endoftext|>`. Infill prompt `prefix + masks + suffix` is a GUESS (CoDA
publishes no infill code and its tokenizer adds no bos).
"""
from __future__ import annotations

from .common import Family
from .stock import StockBackbone


def build(config: dict, where: str) -> StockBackbone:
    return StockBackbone(config, "qwen3", tie=False, where=where)


CODA = Family(
    name="coda", masks=("<|mask|>",), bos=None, eos=None,
    ends=("<|im_end|>", "<|endoftext|>"), shifted=True, build=build,
    note="infill prompt prefix + masks + suffix is a GUESS (CoDA publishes no infill code)")


def matches(config: dict) -> bool:
    return str(config.get("model_type", "")).lower() == "coda" or "CoDALanguageModel" in (config.get("architectures") or [])
