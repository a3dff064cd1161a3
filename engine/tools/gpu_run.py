"""One command for a GPU lease: build the corpus from this machine's own Python, train, evaluate on
the held-out split and write the weights, all inside a wall-time budget.

    python -m spanfill.engine.tools.gpu_run --out runs/gpu            # 10 minutes, CUDA, preset base

Stages, each timed into OUT/gpu_run.json (the log; progress also goes to stderr):

1. corpus: `spanfill data` over this interpreter's standard library and site-packages (or
   --sources): split by a hash of each file's normalised text, and train files that are versions
   of a held-out file dropped (training/corpus.py). --exclude adds another machine's held-out
   split: its files and their versions stay out of train too, so the model can be compared with
   another on that split.
2. tokenizer: byte-level BPE on a sample of the train split only.
3. training: `TrainStep` (bf16 autocast where the device has it, the loss compiled with its sizes
   symbolic) on batches bucketed by context width, made by worker processes, until the training
   share of the budget is spent; the learning rate's cosine runs over that wall time.
4. weights: OUT/model, a checkpoint the engine loads, its weights in safetensors shards of at most
   --shard-mib each (bf16) and --max-model-mib in all, checked before training starts; the
   per-step log OUT/model/train_log.jsonl beside them.
5. evaluation: the saved model through `Engine.load`, held-out tasks scored with diffusion at
   T=4 and AR decoding of the same weights, until the evaluation share of the budget is spent.

tests/test_gpu_run.py rehearses the whole command on the CPU with a tiny configuration.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import sys
import time
from pathlib import Path

import torch

from ..core.checkpoint import save_model, weight_files
from ..core.config import PRESETS
from ..core.device import autocast_dtype, pick_device
from ..core.model import SpanfillModel
from ..core.tokenizer import train_tokenizer
from ..decoding.prompt import Budget
from ..training.corpus import build, default_sources, read_split
from ..training.objective import BatchStream
from ..training.samples import ExampleStream
from ..training.steps import TrainStep, make_optimizer
from ..training.train import SPAN_LENGTHS, lr_at, tokenizer_texts

MIB = 1 << 20
# what the end of the run needs after training: saving the shards and loading them for evaluation
SAVE_SECONDS = 15.0


class Batches(torch.utils.data.IterableDataset):
    """Endless bucketed training batches (objective.BatchStream), span lengths drawn as `spanfill
    train` draws them; each worker process has a stream and seed of its own."""

    def __init__(self, tok, files, budget: Budget, batch: int, seed: int):
        self.tok, self.files, self.budget, self.batch, self.seed = tok, files, budget, batch, seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        seed = self.seed * 1000 + (info.id if info else 0)
        batches = BatchStream(ExampleStream(self.tok, self.files, self.budget, seed=seed), self.batch,
                              self.tok.special, torch.Generator().manual_seed(seed))
        rng = random.Random(seed)
        lengths, weights = zip(*SPAN_LENGTHS)
        while True:
            yield batches.next(rng.choices(lengths, weights=weights)[0])


def model_bytes(model: SpanfillModel, dtype: torch.dtype) -> int:
    return sum(p.numel() for p in model.state_dict().values()) * torch.tensor([], dtype=dtype).element_size()


def evaluate_until(engine, tasks, deadline: float, steps: int = 4) -> list[dict]:
    """Score tasks with diffusion at `steps` and with AR until the deadline; rows per mode and kind."""
    from .scoring import score, summarise, warm
    scores: dict[tuple[str, str], list] = {}
    for task in tasks:
        if time.perf_counter() >= deadline:
            break
        warm(engine, task)
        scores.setdefault(("diffusion", task.kind), []).append(score(engine, task, steps=steps))
        scores.setdefault(("ar", task.kind), []).append(score(engine, task, mode="ar"))
    return [{"mode": mode, "steps": steps if mode == "diffusion" else None, "kind": kind, **summarise(vals)}
            for (mode, kind), vals in sorted(scores.items())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m spanfill.engine.tools.gpu_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="run directory: data/, model/, gpu_run.json")
    ap.add_argument("--minutes", type=float, default=10.0, help="wall time for the whole command")
    ap.add_argument("--eval-minutes", type=float, default=1.5, help="the share of --minutes kept for evaluation")
    ap.add_argument("--sources", type=Path, nargs="*", default=None,
                    help="directories of Python files (default: this interpreter's standard library and site-packages)")
    ap.add_argument("--exclude", type=Path, action="append", default=[], metavar="HELD_OUT_JSONL",
                    help="another split's held_out.jsonl, kept out of training with its versions")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--preset", default="base", choices=sorted(PRESETS))
    ap.add_argument("--length-classes", type=int, default=65,
                    help="the model's length head (config.length_classes: counts 0..K-2 and K-1 or more); 0 = none")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=100, help="warm-up steps of the learning rate")
    ap.add_argument("--workers", type=int, default=min(8, max(1, (os.cpu_count() or 2) - 2)),
                    help="processes making batches (0: in this one)")
    ap.add_argument("--tokenizer-mb", type=float, default=40.0, help="train-split text the tokenizer is trained on")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--shard-mib", type=float, default=16.0)
    ap.add_argument("--max-model-mib", type=float, default=64.0)
    ap.add_argument("--single", type=int, default=300, help="held-out single-line tasks (as many as time allows)")
    ap.add_argument("--multi", type=int, default=150, help="held-out multi-line tasks (as many as time allows)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if missing := [str(s) for s in args.sources or () if not s.is_dir()]:   # before the lease's minutes go
        ap.error(f"--sources: not a directory: {', '.join(missing)}")
    start = time.perf_counter()
    end = start + args.minutes * 60
    log: dict = {"command": "python -m spanfill.engine.tools.gpu_run " + " ".join(argv if argv is not None else sys.argv[1:]),
                 "machine": {"platform": platform.platform(), "torch": torch.__version__, "cpus": os.cpu_count(),
                             "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
                 "seconds": {}}
    out = args.out
    out.mkdir(parents=True, exist_ok=True)

    def stage(name: str, t0: float) -> None:
        log["seconds"][name] = round(time.perf_counter() - t0, 1)
        print(f"{name}: {log['seconds'][name]} s", file=sys.stderr)
        (out / "gpu_run.json").write_text(json.dumps(log, indent=2) + "\n")

    device = pick_device(args.device)
    cfg = dataclasses.replace(PRESETS[args.preset], length_classes=args.length_classes)
    store_dtype = torch.bfloat16
    t0 = time.perf_counter()
    exclude = [f for path in args.exclude for f in read_split(path)]
    log["corpus"] = build(out / "data", args.sources or default_sources(), exclude)
    train_files = read_split(out / "data" / "train.jsonl")
    held_files = read_split(out / "data" / "held_out.jsonl")
    stage("corpus", t0)

    t0 = time.perf_counter()
    tok = train_tokenizer(tokenizer_texts(train_files, int(args.tokenizer_mb * 1e6)), cfg.vocab_size)
    cfg.special_tokens = {name: getattr(tok.special, name) for name in tok.special.__dataclass_fields__}
    budget = Budget()
    cfg.max_context_tokens = budget.total
    torch.manual_seed(args.seed)
    model = SpanfillModel(cfg).to(device).train()
    size = model_bytes(model, store_dtype)
    if size > args.max_model_mib * MIB:
        ap.error(f"--preset {args.preset} has {model.num_params() / 1e6:.1f}M parameters, {size / MIB:.1f} MiB in bf16: "
                 f"more than --max-model-mib {args.max_model_mib}; pick a smaller preset")
    log["model"] = {"preset": args.preset, "params": model.num_params(), "config": cfg.to_json()}
    stage("tokenizer", t0)

    t0 = time.perf_counter()
    amp = autocast_dtype(device)
    opt = make_optimizer(model, args.lr, device)
    step = TrainStep(model, opt, device, amp, args.compile, dynamic=True)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")   # the workers fork after the tokenizer trained
    loader = torch.utils.data.DataLoader(Batches(tok, train_files, budget, args.batch, args.seed), batch_size=None,
                                         num_workers=args.workers, prefetch_factor=4 if args.workers else None)
    train_end = end - args.eval_minutes * 60 - SAVE_SECONDS
    model_dir = out / "model"
    model_dir.mkdir(exist_ok=True)
    records = []
    n, tokens, train_start = 0, 0, time.perf_counter()
    with (model_dir / "train_log.jsonl").open("w") as fh:
        for batch in loader:
            now = time.perf_counter()
            if now >= train_end and n > 0:
                break
            lr = lr_at(n, 0, args.lr, args.warmup, progress=(now - train_start) / max(1e-9, train_end - train_start))
            for group in opt.param_groups:
                group["lr"] = lr
            t_step = time.perf_counter()
            result = step([batch])
            n += 1
            tokens += result["tokens"]
            dt = time.perf_counter() - t_step
            record = {"step": n, "tokens": tokens, "ar_loss": round(result["ar_loss"], 4),
                      "diffusion_loss": round(result["diffusion_loss"], 4), "lr": lr,
                      "grad_norm": round(result["grad_norm"], 3), "span_length": batch.span_length,
                      "tokens_per_s": round(result["tokens"] / dt), "time": round(time.perf_counter() - train_start, 1)}
            records.append(record)
            fh.write(json.dumps(record) + "\n")
            if n % 50 == 1:
                print(f"step {n} {tokens / 1e6:.1f}M tokens ar {record['ar_loss']:.3f} diff {record['diffusion_loss']:.3f} "
                      f"{record['tokens_per_s']} tok/s", file=sys.stderr)
    del loader
    train_seconds = time.perf_counter() - train_start
    last = records[-20:]
    log["training"] = {"steps": n, "tokens": tokens, "seconds": round(train_seconds, 1),
                       "tokens_per_s": round(tokens / train_seconds), "autocast": str(amp).replace("torch.", "") if amp else "fp32",
                       "compiled": args.compile, "batch": args.batch, "first_step_s": records[0]["time"],
                       "final_ar_loss": round(sum(r["ar_loss"] for r in last) / len(last), 4),
                       "final_diffusion_loss": round(sum(r["diffusion_loss"] for r in last) / len(last), 4)}
    stage("training", t0)

    t0 = time.perf_counter()
    model.eval()
    save_model(model_dir, model, tok, shard_bytes=int(args.shard_mib * MIB), dtype=store_dtype)
    files = {name: (model_dir / name).stat().st_size for name in weight_files(model_dir)}
    log["weights"] = {"dtype": "bfloat16", "files": files, "total_mib": round(sum(files.values()) / MIB, 2)}
    stage("save", t0)

    t0 = time.perf_counter()
    from ..engine import Engine
    from .scoring import build_tasks
    engine = Engine.load(model_dir, device=str(device), compile=False)
    tasks = build_tasks(held_files, args.single, args.multi, engine.tokenizer, engine.model.cfg.span_length)
    random.Random(0).shuffle(tasks)          # single- and multi-line tasks mixed, in case time runs out
    log["evaluation"] = {"held_out_files": len(held_files), "tasks_built": len(tasks),
                         "rows": evaluate_until(engine, tasks, end - 2.0)}
    stage("evaluation", t0)
    log["seconds"]["total"] = round(time.perf_counter() - start, 1)
    (out / "gpu_run.json").write_text(json.dumps(log, indent=2) + "\n")
    for r in log["evaluation"]["rows"]:
        print(f"{r['kind']:<7} {r['mode']:<9} tasks {r['tasks']:4d}  shown EM {r['shown_exact_match']:.1%}  "
              f"ES {r['shown_edit_similarity']:.3f}  chars {r['shown_chars_mean']:.1f} (reference {r['reference_chars_mean']:.1f})",
              file=sys.stderr)
    print(f"wrote {model_dir} and {out / 'gpu_run.json'} in {log['seconds']['total']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
