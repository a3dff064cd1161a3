"""Train a spanfill model: dense AR + masked-diffusion loss in one forward pass (DESIGN §4).

    spanfill train --data data/ --out runs/small --preset small --minutes 100

Resumable: every --save-minutes the model directory (HF layout, loadable by the engine as is) is
rewritten atomically together with the optimiser state (safetensors) and the step / data-stream
state (JSON); running the same command again continues from there. bf16 autocast on CPUs with AMX /
AVX-512-BF16 and on CUDA. Curves go to OUT/train_log.jsonl, a one-line progress report to stderr.

The step (`TrainStep`: losses, backward, clipping, a fused AdamW update) is compiled with the
sequence length a symbol, so batches bucketed by context width (objective.BatchStream) each pad
only to their own width and share one graph; benchmarks/train_throughput.py measures it against
the fixed-width, statically compiled step and the eager ones.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import signal
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..core.checkpoint import load_model, save_model
from ..core.config import PRESETS
from .corpus import read_split
from ..core.device import autocast_dtype, pick_device
from .samples import ExampleStream
from ..core.model import SpanfillModel
from .objective import Batch, BatchStream, context_width_for, length_loss, loss_terms
from ..decoding.prompt import Budget
from ..core.tokenizer import train_tokenizer

SPAN_LENGTHS = ((16, 0.25), (32, 0.5), (64, 0.25))
# the length head's share of the loss: its cross-entropy is a few nats against the body's ~4, and
# its gradient reaches every layer through one position per sequence
LENGTH_WEIGHT = 0.1
TOKENIZER_SAMPLE_BYTES = 40_000_000


def lr_at(step: int, total: int, peak: float, warmup: int, floor: float = 0.1, progress: float | None = None) -> float:
    """Linear warm-up over `warmup` steps, then a cosine from peak to floor * peak over the steps up
    to `total`, or over `progress` (0..1) where a run is scheduled by its wall time."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if progress is None:
        progress = (step - warmup) / max(1, total - warmup)
    progress = min(1.0, progress)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_loss_fn(model: SpanfillModel, device: torch.device, amp_dtype, compile_: bool, dynamic: bool = False):
    """(tokens, positions, mask, ar_targets, span_targets, span_masked, t, length_lo, length_censored, C, L)
    -> (ar, diffusion, length); length is 0 for a model without a length head.

    Compiled, the elementwise work around the matmuls (RMSNorm, RoPE, SwiGLU, casts, softmax) fuses,
    which on a small CPU is much of a step's time: at one compile per shape, or (dynamic=True) one
    graph whose batch and sequence sizes are symbols, for batches of varying context width."""
    def loss_fn(tokens, positions, mask, ar_targets, span_targets, span_masked, t, length_lo, length_censored,
                C: int, L: int):
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            if model.length_head is None:
                logits, length_logits = model.forward_train(tokens, positions, mask), None
            else:   # the context ends at <|middle|>, index C - 1 (left-padded to width C)
                logits, length_logits = model.forward_train(tokens, positions, mask, length_at=C - 1)
        return loss_terms(logits, ar_targets, span_targets, span_masked, t, C, L, length_logits, length_lo, length_censored)
    return torch.compile(loss_fn, dynamic=dynamic) if compile_ else loss_fn


def make_optimizer(model: SpanfillModel, lr: float, device: torch.device) -> torch.optim.Optimizer:
    # fused: one kernel per parameter group instead of a dozen elementwise ops per tensor
    fused = device.type in ("cpu", "cuda")
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=fused)


class TrainStep:
    """One optimiser step of the dense objective over `accum` batches: losses, backward, gradient
    clipping at 1.0, the update. The one step `spanfill train`, the GPU run and the throughput
    benchmark all run. compile_: the loss function through torch.compile; dynamic: its graph takes
    any batch shape (bucketed batches) rather than one graph per shape."""

    def __init__(self, model: SpanfillModel, opt: torch.optim.Optimizer, device: torch.device, amp_dtype,
                 compile_: bool, dynamic: bool = False):
        self.model, self.opt, self.device = model, opt, device
        self.loss_fn = make_loss_fn(model, device, amp_dtype, compile_, dynamic)

    def __call__(self, batches: list[Batch]) -> dict:
        ar_sum = diff_sum = length_sum = 0.0
        tokens = 0
        for batch in batches:
            tensors = [x.to(self.device, non_blocking=True) for x in (
                batch.tokens, batch.positions, batch.mask, batch.ar_targets, batch.span_targets, batch.span_masked,
                batch.t, batch.length_lo, batch.length_censored)]
            ar, diff, length = self.loss_fn(*tensors, batch.context_width, batch.span_length)
            ((ar + diff + LENGTH_WEIGHT * length) / len(batches)).backward()
            ar_sum += ar.item() / len(batches)
            diff_sum += diff.item() / len(batches)
            length_sum += length.item() / len(batches)
            tokens += batch.real_tokens
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0).item()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return {"ar_loss": ar_sum, "diffusion_loss": diff_sum, "length_loss": length_sum, "grad_norm": grad_norm,
                "tokens": tokens}


class HeadStep:
    """A step that fits only the length head, the body frozen: the causal context alone is encoded
    (no span, no vocabulary projection, no backward through the body), so a trained model gets a
    length head for a fraction of a training step's cost."""

    def __init__(self, model: SpanfillModel, opt: torch.optim.Optimizer, device: torch.device, amp_dtype):
        self.model, self.opt, self.device, self.amp_dtype = model, opt, device, amp_dtype
        model.requires_grad_(False)
        model.length_head.requires_grad_(True)

    def __call__(self, batches: list[Batch]) -> dict:
        length_sum, tokens = 0.0, 0
        for batch in batches:
            C = batch.context_width
            with torch.no_grad(), torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
                h = self.model.hidden_train(batch.tokens[:, :C].to(self.device), batch.positions[:, :C].to(self.device),
                                            batch.mask[:, :, :C, :C].to(self.device))[:, C - 1].float()   # [B, D]
            loss = length_loss(self.model.length_logits(h), batch.length_lo.to(self.device),
                               batch.length_censored.to(self.device))
            (loss / len(batches)).backward()
            length_sum += loss.item() / len(batches)
            tokens += int(batch.mask[:, 0, C - 1, :C].sum())       # the real context tokens <|middle|> sees
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return {"ar_loss": 0.0, "diffusion_loss": 0.0, "length_loss": length_sum, "grad_norm": 0.0, "tokens": tokens}


def save_train_state(out: Path, opt: torch.optim.Optimizer, state: dict) -> None:
    tensors = {}
    for i, s in opt.state_dict()["state"].items():
        for name, value in s.items():
            tensors[f"{i}.{name}"] = value.contiguous() if value.dim() else value.reshape(1)
    save_file(tensors, str(out / "optimizer.safetensors.tmp"))
    (out / "optimizer.safetensors.tmp").replace(out / "optimizer.safetensors")
    (out / "train_state.json.tmp").write_text(json.dumps(state))
    (out / "train_state.json.tmp").replace(out / "train_state.json")


def load_train_state(out: Path, opt: torch.optim.Optimizer) -> dict:
    tensors = load_file(str(out / "optimizer.safetensors"))
    sd = opt.state_dict()
    for key, value in tensors.items():
        i, name = key.split(".", 1)
        sd["state"].setdefault(int(i), {})[name] = value.reshape(()) if name == "step" else value
    opt.load_state_dict(sd)
    return json.loads((out / "train_state.json").read_text())


def tokenizer_texts(files, limit=TOKENIZER_SAMPLE_BYTES):
    rng = random.Random(0)
    order = list(range(len(files)))
    rng.shuffle(order)
    used = 0
    for i in order:
        if used > limit:
            return
        used += len(files[i].text)
        yield files[i].text


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="spanfill train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="directory written by `spanfill data`")
    ap.add_argument("--out", type=Path, required=True, help="run directory (resumed if it exists)")
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--total-steps", type=int, default=6000, help="length of the cosine schedule")
    ap.add_argument("--minutes", type=float, default=float("inf"), help="stop (after saving) after this wall time")
    ap.add_argument("--save-minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--init", type=Path, default=None,
                    help="start a new run from this model directory's weights and tokenizer (fresh optimiser), "
                         "e.g. the shipped model on a machine where its run directory is gone")
    ap.add_argument("--length-classes", type=int, default=None,
                    help="give the model a length head of this many classes (config.length_classes; a new "
                         "run's preset or an --init model without one); 0 = none")
    ap.add_argument("--head-only", action="store_true",
                    help="fit only the length head (HeadStep), the rest of the model frozen")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                    help="torch.compile the training step")
    ap.add_argument("--bucket", action=argparse.BooleanOptionalAction, default=True,
                    help="batch examples by context width, each batch padded to its own width (compiled: one "
                         "graph with the sizes symbolic); --no-bucket pads every batch to the budget's width")
    args = ap.parse_args(argv)

    device = pick_device(args.device)
    amp_dtype = autocast_dtype(device)
    out = args.out
    train_files = read_split(args.data / "train.jsonl")
    if (out / "train_state.json").exists():
        model, tok = load_model(out, device=device)
        cfg = model.cfg
    elif args.init is not None:
        model, tok = load_model(args.init, device=device, dtype=torch.float32)
        cfg = model.cfg
        out.mkdir(parents=True, exist_ok=True)
        if args.length_classes and model.length_head is None:
            cfg.length_classes = args.length_classes
            model.length_head = SpanfillModel(cfg).length_head.to(device)
        print(f"initialised from {args.init} ({model.num_params() / 1e6:.1f}M params)", file=sys.stderr)
    else:
        cfg = dataclasses.replace(PRESETS[args.preset])
        if args.length_classes is not None:
            cfg.length_classes = args.length_classes
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        tok = train_tokenizer(tokenizer_texts(train_files), cfg.vocab_size)
        print(f"tokenizer: {tok.vocab_size} tokens in {time.time() - t0:.0f}s", file=sys.stderr)
        cfg.special_tokens = {name: getattr(tok.special, name) for name in tok.special.__dataclass_fields__}
        torch.manual_seed(args.seed)
        model = SpanfillModel(cfg).to(device)
    model.train()
    budget = Budget()
    cfg.max_context_tokens = budget.total
    opt = make_optimizer(model, args.lr, device)
    stream = ExampleStream(tok, train_files, budget, seed=args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    state = {"step": 0, "tokens": 0, "seconds": 0.0}
    if args.init is not None and not (out / "train_state.json").exists() and (args.init / "train_log.jsonl").exists():
        # continue the shipped run's count and schedule: its log comes along, data order is new
        shipped_log = (args.init / "train_log.jsonl").read_text()
        (out / "train_log.jsonl").write_text(shipped_log)
        last = json.loads(shipped_log.splitlines()[-1])
        # this run's schedule (warm-up, cosine over --total-steps) starts at the shipped run's last step
        state.update(step=last["step"], tokens=last["tokens"], seconds=last["time"], schedule_start=last["step"])
        stream.rng.seed(args.seed + last["step"])
        gen.manual_seed(args.seed + last["step"])
    if (out / "train_state.json").exists():
        state = load_train_state(out, opt)
        stream.rng.setstate(_tuple(state["stream_rng"]))
        gen.manual_seed(args.seed + state["step"])
        print(f"resumed at step {state['step']} ({state['tokens'] / 1e6:.1f}M tokens)", file=sys.stderr)
    span_rng = random.Random(args.seed + state["step"])
    log_path = out / "train_log.jsonl"
    if log_path.exists():  # drop records of steps after the checkpoint we resumed from
        kept = [line for line in log_path.read_text().splitlines() if json.loads(line)["step"] <= state["step"]]
        log_path.write_text("".join(line + "\n" for line in kept))
    log = log_path.open("a")
    if args.head_only and model.length_head is None:
        ap.error("--head-only needs a model with a length head (--length-classes)")
    step = (HeadStep(model, opt, device, amp_dtype) if args.head_only
            else TrainStep(model, opt, device, amp_dtype, args.compile, dynamic=args.bucket))
    # unbucketed and compiled: pad every batch to the budget's width so each span length is one shape
    min_width = context_width_for(budget.total) if args.compile and not args.bucket else 0
    batches = BatchStream(stream, args.batch, tok.special, gen, args.bucket, min_width)
    start = last_save = time.time()
    seconds_before = state["seconds"]

    def checkpoint():
        state["seconds"] = seconds_before + time.time() - start
        state["stream_rng"] = stream.rng.getstate()
        save_model(out, model, tok)
        save_train_state(out, opt, state)

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))   # save, then exit
    first = state.get("schedule_start", 0)
    while state["step"] - first < args.total_steps and not stop:
        t0 = time.time()
        lr = lr_at(state["step"] - first, args.total_steps, args.lr, args.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        L = span_rng.choices([l for l, _ in SPAN_LENGTHS], weights=[w for _, w in SPAN_LENGTHS])[0]
        result = step([batches.next(L) for _ in range(args.accum)])
        ar_sum, diff_sum, grad_norm, tokens = (result[k] for k in ("ar_loss", "diffusion_loss", "grad_norm", "tokens"))
        state["step"] += 1
        state["tokens"] += tokens
        dt = time.time() - t0
        record = {"step": state["step"], "tokens": state["tokens"], "ar_loss": round(ar_sum, 4),
                  "diffusion_loss": round(diff_sum, 4), "length_loss": round(result["length_loss"], 4), "lr": lr, "grad_norm": round(grad_norm, 3),
                  "span_length": L, "tokens_per_s": round(tokens / dt), "time": round(seconds_before + time.time() - start, 1)}
        log.write(json.dumps(record) + "\n")
        log.flush()
        print(f"\rstep {state['step']}/{args.total_steps} {state['tokens'] / 1e6:.2f}M tok "
              f"ar {ar_sum:.3f} diff {diff_sum:.3f} lr {lr:.2e} {tokens / dt:.0f} tok/s", end="", file=sys.stderr)
        if time.time() - last_save > args.save_minutes * 60:
            checkpoint()
            last_save = time.time()
        if time.time() - start > args.minutes * 60:
            break
    checkpoint()
    print(f"\nsaved {out} at step {state['step']}", file=sys.stderr)


def _tuple(x):
    return tuple(_tuple(i) for i in x) if isinstance(x, list) else x


if __name__ == "__main__":
    main()
