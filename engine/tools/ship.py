"""Ship a trained run as the default model: copy the loadable files into engine/default_model/ and
write MODEL_CARD.md from the run's own records (corpus stats, training state and log, evaluation).

    python -m spanfill.engine.tools.ship --run runs/small --data data --eval benchmarks/results/eval.json [--steps T]
                                         [--weights runs/small/ema]

Only figures found in those files go into the card, so the card can be regenerated and checked.
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
from pathlib import Path

from ..api import MAX_STEPS
from ..core.checkpoint import DEFAULT_MODEL_DIR, load_model, weight_files, write_model_folder
from .scoring import decoding_label


def _eval_table(report: dict) -> str:
    rows = ["| task | decoding | exact match | edit similarity | shown: exact match | edit similarity | chars (reference) "
            "| median ms | p95 ms | mean ms | forward passes |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(report["results"], key=lambda r: (r["kind"], r["mode"] != "ar", r.get("rule", ""), r.get("fallback", False),
                                                       r.get("check") is not None, r["steps"] or 0)):
        mode = "AR (same weights)" if r["mode"] == "ar" else decoding_label(r)
        mean = f"{r['latency_mean_ms']:.1f}" if "latency_mean_ms" in r else "–"     # older result files
        shown = (f"{r['shown_exact_match']:.1%} | {r['shown_edit_similarity']:.3f} | "
                 f"{r['shown_chars_mean']:.1f} ({r['reference_chars_mean']:.1f})" if "shown_exact_match" in r else "– | – | –")
        rows.append(f"| {r['kind']}-line ({r['tasks']}) | {mode} | {r['exact_match']:.1%} | {r['edit_similarity']:.3f} | "
                    f"{shown} | {r['latency_median_ms']:.1f} | {r['latency_p95_ms']:.1f} | {mean} | "
                    f"{r['forward_passes_mean']:.1f} |")
    return "\n".join(rows)


def _steps_note(steps: int, trained_steps: int) -> str:
    if steps == trained_steps:
        return ""
    return (f" (set when shipping, `--steps {steps}`; the run's configuration said T={trained_steps}: see the evaluation "
            f"below for both)")


def _weights_note(weights: Path) -> str:
    """What the shipped weights are where they are not the run's last step (training/averaging.py)."""
    if not (weights / "average.json").exists():
        return ""
    average = json.loads((weights / "average.json").read_text())
    if average["kind"] == "ema":
        return (f"\n* Weights: the run's exponential moving average (`--ema {average['decay']}`, its centre of mass "
                f"{1 / (1 - average['decay']):.0f} steps back), as saved at step {average['step']}.")
    return f"\n* Weights: the uniform mean of {len(average['models'])} checkpoints (`spanfill average`)."


def card(run: Path, data: Path, report: dict, train_command: str, steps: int | None = None,
         weights: Path | None = None) -> str:
    weights = weights or run
    cfg = json.loads((weights / "config.json").read_text())
    trained_steps = cfg["steps"]
    cfg["steps"] = steps or trained_steps
    state = json.loads((run / "train_state.json").read_text())
    stats = json.loads((data / "stats.json").read_text())
    log = [json.loads(line) for line in (run / "train_log.jsonl").read_text().splitlines()]
    last = [r for r in log if "ar_loss" in r][-20:]      # a head-only step (--head-only) logs its length loss alone
    ar = sum(r["ar_loss"] for r in last) / len(last)
    diff = sum(r["diffusion_loss"] for r in last) / len(last)
    model, _ = load_model(weights)
    return f"""# spanfill default model

A {model.num_params() / 1e6:.1f}M-parameter spanfill model (dim {cfg['dim']}, {cfg['n_layers']} layers,
{cfg['n_heads']} heads, SwiGLU {cfg['ffn_dim']}, vocabulary {cfg['vocab_size']} byte-level BPE), trained by
this project from scratch with the dense AR + masked-diffusion objective (DESIGN §4). Default span
L={cfg['span_length']}, T={cfg['steps']} steps{_steps_note(cfg['steps'], trained_steps)}; trained on spans of 16, 32 and 64
with contexts of up to {cfg['max_context_tokens']} tokens.

## Data

Python source from the training machine's interpreter: {', '.join(f'`{s}`' for s in stats['sources'])}
(CPython {platform.python_version()} standard library and the packages installed beside it), built by
`spanfill data`. Exact and whitespace-insensitive duplicates, generated, minified, binary and
benchmark-like files (HumanEval, MBPP, ... by name or content) removed; split by a hash of each file's
normalised text before anything was trained.

| split | files | bytes |
|---|---|---|
| train | {stats['train']['files']} | {stats['train']['bytes']:,} |
| held-out | {stats['held_out']['files']} | {stats['held_out']['bytes']:,} |

Rejected: {', '.join(f'{k} {v}' for k, v in sorted(stats['rejected'].items()))}. The tokenizer was trained
on a 40 MB sample of the train split only.

## Training

* {state['step']} optimiser steps, {state['tokens'] / 1e6:.1f}M tokens (context + middle + noised span),
  {state['seconds'] / 60:.0f} minutes of wall time on a 2-core x86-64 CPU with AVX-512-BF16
  (bf16 autocast), often shared with other work on the same cores.
* Final losses (mean of the last {len(last)} steps): AR {ar:.3f}, diffusion {diff:.3f}.{_weights_note(weights)}
* Curves: `train_log.jsonl` beside this card (one JSON record per step: losses, learning rate,
  gradient norm, span length, tokens/s, wall time).
* Command (resumed several times with the same data and output directory; `--total-steps` of the
  last invocation shown):

      {train_command}

## Held-out evaluation

`{report.get('command', 'spanfill eval')}` on files never trained on; each task's context is cached
first, then every decoding mode runs against it (as while typing). Latency is the whole `complete`
call on the evaluation machine.

{_eval_table(report)}

## Limits

A small model trained for a short time; read its quality from the table above, not from its size.
It has seen only the Python of one interpreter's standard library and installed packages. Multi-line
tasks are restricted to middles that fit one span. To train on from these weights on a machine where
the run directory is gone: `spanfill train --data DATA --out runs/next --init engine/default_model
--total-steps N` (log and step count carry over; the optimiser state starts fresh).
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spanfill.engine.tools.ship", description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--eval", type=Path, required=True)
    ap.add_argument("--train-command", required=True)
    ap.add_argument("--out", type=Path, default=DEFAULT_MODEL_DIR)
    ap.add_argument("--weights", type=Path, default=None,
                    help="ship this model directory's weights instead of the run's last step, e.g. the run's "
                         "average (RUN/ema, or `spanfill average` output); log and state still come from --run")
    ap.add_argument("--steps", type=int, default=None,
                    help="the shipped model's default denoising steps T (default: the run's configuration)")
    args = ap.parse_args(argv)
    if args.steps is not None and not 1 <= args.steps <= MAX_STEPS:
        ap.error(f"--steps must be 1 to {MAX_STEPS}, not {args.steps}")
    weights = args.weights or args.run
    sources = [weights / name for name in ("config.json", "tokenizer.json", *weight_files(weights))]
    sources.append(args.run / "train_log.jsonl")
    if missing := [str(path) for path in sources if not path.is_file()]:
        ap.error(f"nothing shipped: missing {', '.join(missing)}")
    # everything read (the card reads the run, the data and the evaluation) before anything is written
    text = card(args.run, args.data, json.loads(args.eval.read_text()), args.train_command, args.steps, weights)

    def fill(folder: Path) -> None:
        for path in sources:
            shutil.copy2(path, folder / path.name)
        if args.steps is not None:
            config = json.loads((folder / "config.json").read_text())
            config["steps"] = args.steps
            (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        (folder / "MODEL_CARD.md").write_text(text)
    write_model_folder(args.out, fill)     # the folder is replaced whole: no old weights beside new ones
    print(f"shipped {args.run} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
