"""Depth growth: a trained model with more layers that computes exactly what it computed before
(`spanfill grow`).

A small model that has seen many tokens per parameter stops improving with more of the same
training; more layers give it room, and starting them from the trained weights keeps what it has
learned. Each new block is a copy of the block below it whose two residual outputs (the attention's
`wo` and the MLP's `w2`) are zero, so it adds nothing to the residual stream until training moves
those two matrices (their gradients are not zero: their inputs are the copied block's activations).
New blocks are spread evenly through the stack, each after a group of original ones (block expansion,
Wu et al. 2024, "LLaMA Pro: Progressive LLaMA with Block Expansion").

    spanfill grow engine/default_model --layers 8 --out runs/grown
    spanfill train --data DATA --out runs/next --init runs/grown --new-schedule ...

The grown model keeps the model's training log (train_log.jsonl), so a run from it continues the step
and token counts.
"""
from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
from pathlib import Path

import torch

from ..core.checkpoint import CheckpointError, check_writable_folder, load_model, save_model
from ..core.model import SpanfillModel


def expansion_plan(old: int, new: int) -> list[int | None]:
    """The grown stack as a list: an original block's index, or None for a new block (which copies the
    original block before it). The new blocks are spread evenly, each after a group of original ones,
    the last group ending the stack: 6 → 8 is [0, 1, 2, None, 3, 4, 5, None]; growing to more than
    twice the layers puts several new blocks after one original (2 → 5: [0, None, 1, None, None])."""
    if old < 1 or new < old:
        raise ValueError(f"a model of {old} layers can grow to {old} or more layers, not {new}")
    added = new - old
    plan: list[int | None] = []
    for index in range(old):
        plan += [index] + [None] * ((index + 1) * added // old - index * added // old)
    return plan


def grow(model: SpanfillModel, n_layers: int) -> SpanfillModel:
    """A copy of `model` with `n_layers` blocks that gives the same outputs (see the module's doc)."""
    if model.head is not None:
        raise ValueError("grow a model as loaded in fp32, not one with a quantized head (quantize.py)")
    plan = expansion_plan(model.cfg.n_layers, n_layers)
    grown = copy.deepcopy(model)
    blocks = []
    for index in plan:
        if index is None:
            block = copy.deepcopy(blocks[-1])
            torch.nn.init.zeros_(block.attn.wo.weight)
            torch.nn.init.zeros_(block.mlp.w2.weight)
        else:
            block = grown.layers[index]
        blocks.append(block)
    grown.layers = torch.nn.ModuleList(blocks)
    grown.cfg.n_layers = n_layers
    return grown


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill grow", description="write a model with more layers that computes "
                                 "what the given one computes (new blocks start as the identity), to train on "
                                 "with `spanfill train --init`")
    ap.add_argument("model", type=Path, help="model directory (config.json, weights, tokenizer.json)")
    ap.add_argument("--layers", type=int, required=True, help="the grown model's layer count")
    ap.add_argument("--out", type=Path, required=True, help="new model directory")
    args = ap.parse_args(argv)
    if args.out.resolve() == args.model.resolve():
        ap.error(f"--out {args.out} is the model grown: write the grown model to a new directory")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        ap.error(f"--out {args.out} exists and is not an empty directory: write the grown model to a new one "
                 "(a training log or run state left there would be taken for the grown model's)")
    try:
        check_writable_folder(args.out)
        model, tok = load_model(args.model, dtype=torch.float32)
        grown = grow(model, args.layers)
    except (ValueError, CheckpointError) as e:
        print(f"spanfill grow: {e}", file=sys.stderr)
        return 2
    save_model(args.out, grown, tok)
    log = args.model / "train_log.jsonl"
    if log.exists():     # the grown model's history is the model's: `train --init` continues its step count
        shutil.copyfile(log, args.out / "train_log.jsonl")
    (args.out / "grown.json").write_text(json.dumps({"from": str(args.model), "layers": [
        "new" if i is None else i for i in expansion_plan(model.cfg.n_layers, args.layers)]}) + "\n")
    print(f"wrote {args.out}: {model.cfg.n_layers} → {args.layers} layers, {grown.num_params() / 1e6:.1f}M "
          "parameters", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
