"""Export the causal half of a spanfill checkpoint as a Hugging Face `LlamaForCausalLM`.

    spanfill export-llama --model DIR --out llama-dir/

spanfill's causal path is Llama-shaped (RoPE in rotate-half layout, RMSNorm, SwiGLU, tied
embeddings), so the mapping is a rename plus splitting the fused qkv and gate/up projections. The
export decodes exactly like spanfill's AR mode (tested), which makes it (a) the honest baseline for
benchmarks — the same weights through `transformers.generate()` — and (b) a way to run the AR half
in any Llama runtime. The bidirectional span path has no Llama equivalent and is not exported.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..core.checkpoint import CheckpointError, load_model, recover_swap, write_model_folder
from ..core.config import MODEL_TYPE
from ..decoding.healing import Healer
from ..core.model import SpanfillModel
from ..decoding.prompt import context_ids


def llama_config(model: SpanfillModel) -> dict:
    cfg = model.cfg
    sp = cfg.special_tokens
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.dim, "intermediate_size": cfg.ffn_dim,
        "num_hidden_layers": cfg.n_layers, "num_attention_heads": cfg.n_heads, "num_key_value_heads": cfg.n_heads,
        "head_dim": cfg.head_dim, "hidden_act": "silu", "max_position_embeddings": cfg.max_positions,
        "rms_norm_eps": cfg.norm_eps, "rope_parameters": {"rope_theta": cfg.rope_theta, "rope_type": "default"},
        "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
        "bos_token_id": None, "eos_token_id": sp.get("eom"), "pad_token_id": sp.get("pad"),
        "torch_dtype": "float32",
    }


def llama_state_dict(model: SpanfillModel) -> dict[str, torch.Tensor]:
    cfg = model.cfg
    out = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.norm.weight}
    for i, block in enumerate(model.layers):
        p = f"model.layers.{i}."
        q, k, v = block.attn.wqkv.weight.view(3, cfg.dim, cfg.dim)
        gate, up = block.mlp.w13.weight.view(2, cfg.ffn_dim, cfg.dim)
        out.update({
            p + "self_attn.q_proj.weight": q, p + "self_attn.k_proj.weight": k, p + "self_attn.v_proj.weight": v,
            p + "self_attn.o_proj.weight": block.attn.wo.weight,
            p + "mlp.gate_proj.weight": gate, p + "mlp.up_proj.weight": up, p + "mlp.down_proj.weight": block.mlp.w2.weight,
            p + "input_layernorm.weight": block.attn_norm.weight, p + "post_attention_layernorm.weight": block.mlp_norm.weight,
        })
    return {k: v.detach().float().contiguous().clone() for k, v in out.items()}


def export(model_dir: str | Path | None, out: Path) -> Path:
    """Write the Llama checkpoint into `out` (config.json, model.safetensors, tokenizer.json): the
    folder's weights, config and tokenizer are replaced together or not at all (an export interrupted
    over an earlier one leaves that one whole). A folder that holds a spanfill checkpoint (the exported
    one, say) is refused: the export's files have the same names."""
    out = Path(out)
    recover_swap(out)                    # a spanfill save stopped between its renames: its folder is back
    if _model_type(out / "config.json") == MODEL_TYPE:
        raise CheckpointError(f"{out} holds a spanfill checkpoint, which the export would overwrite: "
                              f"name another --out")
    model, tok = load_model(model_dir, dtype=torch.float32)

    def fill(folder: Path) -> None:
        (folder / "config.json").write_text(json.dumps(llama_config(model), indent=2) + "\n")
        save_file(llama_state_dict(model), str(folder / "model.safetensors"), metadata={"format": "pt"})
        tok.save(folder / "tokenizer.json")
    write_model_folder(out, fill)
    return out


def _model_type(config: Path) -> str | None:
    """The model_type a config.json names; None where there is no readable one."""
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    return data.get("model_type") if isinstance(data, dict) else None


def generate_completion(llama, engine, prefix: str, suffix: str, max_tokens: int) -> tuple[str, int]:
    """What spanfill's AR mode would complete, through `llama.generate()` on the same context: token
    healing (healing.py) becomes a logits processor on the first new token. Returns (text, tokens)."""
    tok, sp = engine.tokenizer, engine.tokenizer.special
    healing = engine.healer.heal(context_ids(tok, prefix, suffix, budget=engine.budget))
    ids = torch.tensor([healing.ids])

    def first_token_bias(input_ids, scores):
        if healing.first_bias is not None and input_ids.shape[1] == ids.shape[1]:
            scores = scores + healing.first_bias.to(scores.device, scores.dtype)
        return scores

    out = llama.generate(ids, max_new_tokens=max_tokens, do_sample=False, eos_token_id=sp.eom, pad_token_id=sp.pad,
                         suppress_tokens=[sp.pad, sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle],
                         logits_processor=[first_token_bias])
    generated = out[0, ids.shape[1]:].tolist()
    end = generated.index(sp.eom) if sp.eom in generated else len(generated)
    data = Healer.strip(tok.decode_bytes(generated[:end]), healing.stub) or b""
    return data.decode("utf-8", errors="ignore"), len(generated)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill export-llama", description="export the causal half as LlamaForCausalLM")
    ap.add_argument("--model", default=None, help="spanfill checkpoint directory (default: the shipped model)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    print(f"wrote {export(args.model, args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
