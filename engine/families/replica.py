"""Tiny random-weight replicas of the public checkpoints' on-disk layouts, for tests.

Each replica has the files the real repository has (FAMILIES.md beside DESIGN.md lists them):
config.json with the real keys and values but shrunk sizes, the real tensor names, the real
special-token strings, sharded safetensors with model.safetensors.index.json where the real one is
sharded, and the tokenizer files in the real formats — the Dream family's vocab.json + merges.txt +
added_tokens.json with no tokenizer.json. The publishers' remote-code files are there too, as stubs
that exit if anything ever runs them.

Ids are the replica's own (its vocabulary is tiny), so code that looks tokens up by id instead of by
string fails on a replica. Weights are random but discriminating (random norm weights and biases,
sharp attention, untied heads where the real model is untied), so a missing shift, a wrong tie or a
causal mask changes most argmaxes.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, decoders, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import BPE

from ..testing import SAMPLE_CODE
from .tokenizer import qwen2_bpe

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                 "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                 "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>",
                 "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
SPECIALS = {
    "dream": QWEN_SPECIALS + ["<|beginoftext|>", "<|mask|>"],
    "dream-coder": QWEN_SPECIALS + ["<|beginoftext|>", "<|mask|>"],
    "diffucoder": QWEN_SPECIALS + ["<|beginoftext|>", "<|mask|>", "<|dlm_pad|>"],
    "dreamon": QWEN_SPECIALS + ["<|beginoftext|>", "<|mask|>", "<|expand|>"],
    "open-dcoder": QWEN_SPECIALS + ["<M>"],
    "coda": QWEN_SPECIALS + ["<tool_response>", "</tool_response>", "<think>", "</think>", "<|mask|>"],
    "llada": ["<|startoftext|>", "<|endoftext|>", "<|mdm_mask|>", "<|eot_id|>", "<|start_header_id|>",
              "<|end_header_id|>"],
}
# added tokens the publishers' files mark "special": false (Qwen2.5's and Qwen3's tokenizer.json)
PLAIN = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
         "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
VARIANTS = tuple(SPECIALS)
FAMILY_OF = {"dream": "dream", "dream-coder": "dream", "diffucoder": "dream", "dreamon": "dreamon",
             "open-dcoder": "open-dcoder", "coda": "coda", "llada": "llada"}
REMOTE_CODE = {
    "dream": ["configuration_dream.py", "modeling_dream.py", "tokenization_dream.py", "generation_utils.py"],
    "coda": ["attention.py", "generation_utils.py", "model_config.py", "modeling_coda.py", "modeling_utils.py"],
    "llada": ["configuration_llada.py", "modeling_llada.py"],
}
STUB = 'raise SystemExit("a stand-in for the publisher\'s remote code: spanfill must never run it")\n'
SIZES = dict(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2)


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def _bpe(byte_level_regex: bool) -> HFTokenizer:
    """A tiny BPE trained on SAMPLE_CODE: Qwen2's pipeline, or plain byte-level (LLaDA's replica)."""
    if byte_level_regex:
        hf = HFTokenizer(BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        hf.decoder = decoders.ByteLevel()
    else:
        hf = qwen2_bpe({}, [])
    trainer = trainers.BpeTrainer(vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator([SAMPLE_CODE] * 4, trainer=trainer)
    return hf


def write_tokenizer_files(directory: Path, variant: str) -> dict[str, int]:
    """Write the variant's tokenizer files; returns {special token: id}."""
    llada = variant == "llada"
    hf = _bpe(byte_level_regex=llada)
    specials = SPECIALS[variant]
    for s in specials:        # one at a time, in order: the ids follow the list
        if s in PLAIN:
            hf.add_tokens([AddedToken(s, special=False, normalized=False)])
        else:
            hf.add_special_tokens([AddedToken(s, special=True, normalized=False)])
    ids = {s: hf.token_to_id(s) for s in specials}
    entry = lambda s: {"content": s, "lstrip": False, "normalized": False, "rstrip": False,  # noqa: E731
                       "single_word": False, "special": s not in PLAIN}
    decoder = {str(i): entry(s) for s, i in ids.items()}
    if llada:
        hf.save(str(directory / "tokenizer.json"))
        _write_json(directory / "tokenizer_config.json", {
            "added_tokens_decoder": decoder, "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>", "additional_special_tokens": ["<|mdm_mask|>"],
            "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 4096})
        _write_json(directory / "special_tokens_map.json", {
            "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
            "additional_special_tokens": ["<|mdm_mask|>"]})
        return ids
    hf.model.save(str(directory))                                   # vocab.json, merges.txt
    _write_json(directory / "added_tokens.json", ids)
    dream = FAMILY_OF[variant] in ("dream", "dreamon")
    mask = "<M>" if variant == "open-dcoder" else "<|mask|>"
    config = {"added_tokens_decoder": decoder, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
              "model_max_length": 131072, "clean_up_tokenization_spaces": False}
    if dream:
        config.update(bos_token="<|beginoftext|>", mask_token=mask, tokenizer_class="DreamTokenizer",
                      auto_map={"AutoTokenizer": ["tokenization_dream.DreamTokenizer", None]})
    else:
        config.update(tokenizer_class="Qwen2Tokenizer", bos_token=None,
                      additional_special_tokens=[mask])
        if variant == "coda":
            config.update(eos_token="<|im_end|>", bos_token="<|im_end|>", add_bos_token=False)
        hf.save(str(directory / "tokenizer.json"))
    _write_json(directory / "tokenizer_config.json", config)
    _write_json(directory / "special_tokens_map.json", {k: v for k, v in config.items()
                                                         if k.endswith("_token") and v})
    return ids


def _padded(n: int) -> int:
    """Embedding rows past the tokenizer's size, as the real models have (152064 rows for 151668 tokens)."""
    return -(-(n + 8) // 64) * 64


def _tensor(shape: tuple[int, ...], gen: torch.Generator, std: float, mean: float = 0.0) -> torch.Tensor:
    return torch.randn(shape, generator=gen) * std + mean


def _weights(variant: str, cfg: dict, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Random, discriminating tensors under the real names, shaped by the replica's config.json."""
    V = cfg["vocab_size"]
    state: dict[str, torch.Tensor] = {}
    if variant == "llada":
        d, hidden, heads = cfg["d_model"], cfg["mlp_hidden_size"], cfg["n_heads"]
        sharp, plain = 3.0 / math.sqrt(d), 1.0 / math.sqrt(d)
        t = "model.transformer."
        state[t + "wte.weight"] = _tensor((V, d), gen, 1.0)
        for i in range(cfg["n_layers"]):
            b = f"{t}blocks.{i}."
            for name, shape, std in (("q_proj", (d, d), sharp), ("k_proj", (d, d), sharp), ("v_proj", (d, d), plain),
                                     ("attn_out", (d, d), plain), ("ff_proj", (hidden, d), plain),
                                     ("up_proj", (hidden, d), plain), ("ff_out", (d, hidden), 1 / math.sqrt(hidden))):
                state[b + name + ".weight"] = _tensor(shape, gen, std)
            state[b + "attn_norm.weight"] = _tensor((d,), gen, 0.3, 1.0)
            state[b + "ff_norm.weight"] = _tensor((d,), gen, 0.3, 1.0)
        state[t + "ln_f.weight"] = _tensor((d,), gen, 0.3, 1.0)
        state[t + "ff_out.weight"] = _tensor((V, d), gen, sharp)
        return state
    d, hidden = cfg["hidden_size"], cfg["intermediate_size"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", d // heads)
    sharp, plain = 3.0 / math.sqrt(d), 1.0 / math.sqrt(d)
    state["model.embed_tokens.weight"] = _tensor((V, d), gen, 1.0)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        state[p + "self_attn.q_proj.weight"] = _tensor((heads * hd, d), gen, sharp)
        state[p + "self_attn.k_proj.weight"] = _tensor((kv * hd, d), gen, sharp)
        state[p + "self_attn.v_proj.weight"] = _tensor((kv * hd, d), gen, plain)
        state[p + "self_attn.o_proj.weight"] = _tensor((d, heads * hd), gen, 1 / math.sqrt(heads * hd))
        if variant == "coda":     # Qwen3: q/k norms, no biases
            state[p + "self_attn.q_norm.weight"] = _tensor((hd,), gen, 0.3, 1.0)
            state[p + "self_attn.k_norm.weight"] = _tensor((hd,), gen, 0.3, 1.0)
        else:                     # Qwen2: q/k/v biases
            for name, n in (("q_proj", heads * hd), ("k_proj", kv * hd), ("v_proj", kv * hd)):
                state[p + f"self_attn.{name}.bias"] = _tensor((n,), gen, 0.3)
        state[p + "mlp.gate_proj.weight"] = _tensor((hidden, d), gen, plain)
        state[p + "mlp.up_proj.weight"] = _tensor((hidden, d), gen, plain)
        state[p + "mlp.down_proj.weight"] = _tensor((d, hidden), gen, 1 / math.sqrt(hidden))
        state[p + "input_layernorm.weight"] = _tensor((d,), gen, 0.3, 1.0)
        state[p + "post_attention_layernorm.weight"] = _tensor((d,), gen, 0.3, 1.0)
    state["model.norm.weight"] = _tensor((d,), gen, 0.3, 1.0)
    # Open-dCoder keeps its tied head as a copy in the file; the others have a head of their own
    tied = variant == "open-dcoder"
    state["lm_head.weight"] = state["model.embed_tokens.weight"].clone() if tied else _tensor((V, d), gen, sharp)
    return state


def _config(variant: str, ids: dict[str, int], vocab: int) -> dict:
    s = SIZES
    if variant == "llada":
        return {"architectures": ["LLaDAModelLM"], "auto_map": {
                    "AutoConfig": "configuration_llada.LLaDAConfig", "AutoModel": "modeling_llada.LLaDAModelLM",
                    "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM"},
                "model_type": "llada", "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0,
                "attention_dropout": 0.0, "attention_layer_norm": False, "attention_layer_norm_with_affine": True,
                "bias_for_layer_norm": False, "block_group_size": 1, "block_type": "llama", "d_model": s["hidden"],
                "embedding_dropout": 0.0, "embedding_size": vocab, "eos_token_id": ids["<|endoftext|>"],
                "flash_attention": False, "include_bias": False, "include_qkv_bias": False, "init_cutoff_factor": None,
                "init_device": "meta", "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": False,
                "layer_norm_type": "rms", "layer_norm_with_affine": True, "mask_token_id": ids["<|mdm_mask|>"],
                "max_sequence_length": 4096, "mlp_hidden_size": s["intermediate"], "mlp_ratio": 4,
                "multi_query_attention": None, "n_heads": s["heads"], "n_kv_heads": s["heads"], "n_layers": s["layers"],
                "pad_token_id": ids["<|endoftext|>"], "precision": "amp_bf16", "residual_dropout": 0.0,
                "rms_norm_eps": 1e-05, "rope": True, "rope_full_precision": True, "rope_theta": 500000.0,
                "scale_logits": False, "transformers_version": "4.46.3", "use_cache": False,
                "vocab_size": vocab, "weight_tying": False}
    common = {"attention_dropout": 0.0, "hidden_act": "silu", "hidden_size": s["hidden"], "initializer_range": 0.02,
              "intermediate_size": s["intermediate"], "max_position_embeddings": 2048, "num_attention_heads": s["heads"],
              "num_hidden_layers": s["layers"], "num_key_value_heads": s["kv_heads"], "rms_norm_eps": 1e-06,
              "rope_theta": 1000000.0, "vocab_size": vocab, "transformers_version": "4.46.2", "use_cache": True}
    eot = ids["<|endoftext|>"]
    if variant == "open-dcoder":
        return {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", **common, "bos_token_id": eot,
                "eos_token_id": eot, "max_window_layers": s["layers"], "rope_scaling": None, "sliding_window": 2048,
                "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_sliding_window": False}
    if variant == "coda":
        return {"architectures": ["CoDALanguageModel"], "auto_map": {
                    "AutoConfig": "model_config.CoDAConfig", "AutoModel": "modeling_coda.CoDALanguageModel"},
                "model_type": "CoDA", **common, "hidden_size": 48, "head_dim": 16,
                "attention_bias": False, "bos_token_id": ids["<|im_end|>"], "eos_token_id": ids["<|im_end|>"],
                "pad_token_id": eot, "mask_token_id": ids["<|mask|>"], "torch_dtype": "float32",
                "block_masking_probability": 0.01, "mask_block_sizes": [2, 4, 8], "prefix_probability": 0.01,
                "truncate_probability": 0.01, "sampling_eps": 0.001}
    bos = ids["<|beginoftext|>"] if variant == "dream-coder" else eot      # Dream-v0 and DiffuCoder say 151643
    return {"architectures": ["DreamModel"], "auto_map": {
                "AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"},
            "model_type": "Dream", **common, "bos_token_id": bos, "eos_token_id": eot, "pad_token_id": eot,
            "mask_token_id": ids["<|mask|>"], "max_window_layers": s["layers"], "rope_scaling": None,
            "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_sliding_window": False}


SHARDS = {"dream": 4, "dream-coder": 4, "diffucoder": 4, "dreamon": 4, "coda": 2, "llada": 6, "open-dcoder": 1}


def _save_weights(directory: Path, state: dict[str, torch.Tensor], shards: int, dtype: torch.dtype) -> None:
    state = {k: v.to(dtype).contiguous() for k, v in state.items()}
    if shards == 1:
        save_file(state, str(directory / "model.safetensors"), metadata={"format": "pt"})
        return
    names = list(state)
    weight_map = {}
    for i in range(shards):
        part = names[i::shards]
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file({k: state[k] for k in part}, str(directory / file), metadata={"format": "pt"})
        weight_map.update({k: file for k in part})
    total = sum(v.numel() * v.element_size() for v in state.values())
    _write_json(directory / "model.safetensors.index.json", {"metadata": {"total_size": total},
                                                              "weight_map": dict(sorted(weight_map.items()))})


def build_replica(directory: str | Path, variant: str, seed: int = 0) -> Path:
    """Write a tiny replica of `variant` (one of VARIANTS) into `directory`."""
    if variant not in SPECIALS:
        raise ValueError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ids = write_tokenizer_files(directory, variant)
    vocab = _padded(max(ids.values()) + 1)
    cfg = _config(variant, ids, vocab)
    _write_json(directory / "config.json", cfg)
    eos = ids.get("<|im_end|>" if variant == "coda" else "<|endoftext|>")
    if variant != "open-dcoder":
        _write_json(directory / "generation_config.json", {"bos_token_id": cfg.get("bos_token_id"), "eos_token_id": eos,
                                                           "pad_token_id": cfg.get("pad_token_id"), "_from_model_config": True})
    for stub in REMOTE_CODE.get(FAMILY_OF[variant].replace("dreamon", "dream"), []):
        (directory / stub).write_text(STUB)
    if variant == "diffucoder":
        (directory / "chat_template.jinja").write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n"
                                                       "{{ m.content }}<|im_end|>\n{% endfor %}")
    state = _weights(variant, cfg, torch.Generator().manual_seed(seed))
    dtype = torch.float32 if variant == "coda" else torch.bfloat16
    _save_weights(directory, state, SHARDS[variant], dtype)
    return directory

