"""Weight averaging: an exponential moving average of the weights kept beside a training run, and
the uniform mean of saved checkpoints (`spanfill average`).

At a learning rate high enough to keep learning, the weights of a single step sit somewhere in a
noisy valley; their average over the last few hundred steps sits nearer its floor (Polyak averaging;
Izmailov et al. 2018, "Averaging Weights Leads to Wider Optima and Better Generalization"), without
annealing the learning rate and so without ending the run. The averaged model is the one to
evaluate and ship; training goes on from the raw weights.

    spanfill train ... --ema 0.996                    # OUT/ema/, rewritten at every checkpoint
    spanfill average runs/a runs/b runs/c --out runs/abc
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

from ..core.checkpoint import CheckpointError, load_model, recover_swap, save_model
from ..core.model import SpanfillModel
from ..core.tokenizer import Tokenizer

EMA_DIR = "ema"          # the average's model directory inside a run directory


def ema_decay(value: str | float) -> float:
    """An EMA decay: a number strictly between 0 and 1. `spanfill train --ema` checks its value with it before
    the model loads."""
    decay = float(value)
    if not 0.0 < decay < 1.0:
        raise ValueError(f"EMA decay must lie strictly between 0 and 1 (e.g. 0.996), not {value}")
    return decay


class WeightEMA:
    """ema <- decay * ema + (1 - decay) * weights after every optimiser step, in fp32 on the run's
    device. Its centre of mass lies 1 / (1 - decay) steps back (0.996: 250 steps)."""

    def __init__(self, model: SpanfillModel, decay: float):
        self.decay = ema_decay(decay)
        self.model = copy.deepcopy(model).float().eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model: SpanfillModel) -> None:
        torch._foreach_lerp_(list(self.model.parameters()), [p.detach().float() for p in model.parameters()],
                             1.0 - self.decay)

    def save(self, run: Path, tok: Tokenizer, step: int) -> None:
        directory = Path(run) / EMA_DIR
        save_model(directory, self.model, tok)
        (directory / "average.json").write_text(json.dumps({"kind": "ema", "decay": self.decay, "step": step}) + "\n")

    def load(self, run: Path) -> bool:
        """Take up the average a resumed run saved; False where it has none (the average starts from
        the current weights)."""
        directory = Path(run) / EMA_DIR
        recover_swap(directory)
        if not (directory / "config.json").exists():
            return False
        saved, _ = load_model(directory, dtype=torch.float32)
        self.model.load_state_dict(saved.state_dict())
        return True


def average_models(directories: list[Path]) -> tuple[SpanfillModel, Tokenizer]:
    """The uniform mean of the float weights of checkpoints of one architecture and tokenizer (the
    first one's config and tokenizer come along)."""
    if len(directories) < 2:
        raise ValueError(f"averaging needs at least two checkpoints, got {len(directories)}")
    model, tok = load_model(directories[0], dtype=torch.float32)
    total = {k: v.clone() for k, v in model.state_dict().items()}
    vocab = Path(directories[0], "tokenizer.json").read_bytes()
    for directory in directories[1:]:
        other, _ = load_model(directory, dtype=torch.float32)
        if other.cfg != model.cfg:
            raise CheckpointError(f"{directory}: its config differs from {directories[0]}'s; only checkpoints of "
                                  f"one run (one architecture) can be averaged")
        if Path(directory, "tokenizer.json").read_bytes() != vocab:
            raise CheckpointError(f"{directory}: its tokenizer differs from {directories[0]}'s; only checkpoints of "
                                  f"one run can be averaged")
        for k, v in other.state_dict().items():
            if v.is_floating_point():
                total[k] += v
    model.load_state_dict({k: v / len(directories) if v.is_floating_point() else v for k, v in total.items()})
    return model, tok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill average", description="write the uniform mean of the weights of "
                                 "checkpoints of one run as a new model directory")
    ap.add_argument("models", type=Path, nargs="+", help="model directories (config.json, weights, tokenizer.json)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    out = args.out.resolve()
    if any(out == m.resolve() for m in args.models):
        ap.error(f"--out {args.out} is one of the checkpoints averaged: write the mean to a new directory")
    if (out / "train_state.json").exists() or (out.exists() and not out.is_dir()):
        ap.error(f"--out {args.out} is a training run or a file: write the mean to a new directory "
                 "(a run resumed from it would train the mean with the run's old optimiser state)")
    try:
        model, tok = average_models(args.models)
    except (ValueError, CheckpointError) as e:
        print(f"spanfill average: {e}", file=sys.stderr)
        return 2
    save_model(args.out, model, tok)
    (args.out / "average.json").write_text(json.dumps({"kind": "mean", "models": [str(m) for m in args.models]}) + "\n")
    print(f"wrote the mean of {len(args.models)} checkpoints to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
