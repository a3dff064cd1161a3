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
import os
import random
import signal
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..core.checkpoint import check_writable_folder, load_model, recover_swap, save_model
from ..core.config import PRESETS
from .corpus import read_split
from ..core.device import autocast_dtype, pick_device
from .samples import ExampleStream
from ..core.model import SpanfillModel
from .averaging import WeightEMA, ema_decay
from .objective import BatchStream, context_width_for
from .steps import HeadStep, TrainStep, make_optimizer
from ..decoding.prompt import Budget
from ..core.tokenizer import train_tokenizer

SPAN_LENGTHS = ((16, 0.25), (32, 0.5), (64, 0.25))
TOKENIZER_SAMPLE_BYTES = 40_000_000
LOSSES = ("ar_loss", "diffusion_loss", "length_loss")      # as a step reports them, those it has


def lr_at(step: int, total: int, peak: float, warmup: int, floor: float = 0.1, progress: float | None = None) -> float:
    """Linear warm-up over `warmup` steps, then a cosine from peak to floor * peak over the steps up
    to `total`, or over `progress` (0..1) where a run is scheduled by its wall time."""
    if step < warmup:
        return peak * (step + 1) / warmup
    if progress is None:
        progress = (step - warmup) / max(1, total - warmup)
    progress = min(1.0, progress)
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


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


def log_records(text: str) -> list[dict]:
    """train_log.jsonl's records; a last line cut short (the run was killed while writing it) is left out."""
    lines = text.splitlines()
    records = [json.loads(line) for line in lines[:-1]]
    if lines:
        try:
            records.append(json.loads(lines[-1]))
        except json.JSONDecodeError:
            pass
    return records


DEFAULT_PRESET = "small"


def hold_run(out: Path):
    """An exclusive lock on the run in `out`, held until the process ends (the open file it returns);
    ValueError naming the holder's pid when another process trains there. Beside the folder, not in
    it: each save replaces the folder. None where the system has no flock (the run goes unguarded)."""
    try:
        import fcntl
    except ImportError:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = open(out.with_name(out.name + ".lock"), "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise ValueError(f"{out} is being trained by another process (pid {holder}): two runs in one folder "
                         "would overwrite each other's checkpoints; stop it first (SIGTERM saves)") from None
    except OSError as err:           # a file system without locks (NFS or Lustre mounted so)
        lock.close()
        print(f"warning: {out} cannot be locked ({err}): nothing stops a second run in the same folder",
              file=sys.stderr)
        return None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def at_least(low: int):
    """An argparse type: an integer >= low."""
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"{value} is less than {low}")
        return value
    parse.__name__ = "integer"           # argparse names the type in its message
    return parse


def positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number above 0")
    return value


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
    ap.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS))
    ap.add_argument("--batch", type=at_least(1), default=16)
    ap.add_argument("--accum", type=at_least(1), default=1)
    ap.add_argument("--lr", type=positive, default=2e-3)
    ap.add_argument("--warmup", type=at_least(0), default=100)
    ap.add_argument("--total-steps", type=at_least(1), default=6000,
                    help="the step the cosine schedule ends at (with --new-schedule: its length, counted from the "
                         "--init model's last step)")
    ap.add_argument("--minutes", type=float, default=float("inf"), help="stop (after saving) after this wall time")
    ap.add_argument("--save-minutes", type=positive, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--init", type=Path, default=None,
                    help="start a new run from this model directory's weights and tokenizer (fresh optimiser), "
                         "e.g. the shipped model on a machine where its run directory is gone")
    ap.add_argument("--length-classes", type=at_least(0), default=None,
                    help="give the model a length head of this many classes (config.length_classes; a new "
                         "run's preset or an --init model without one); 0 = none")
    ap.add_argument("--new-schedule", action="store_true",
                    help="with --init: the warm-up and cosine start again at the --init model's last step")
    ap.add_argument("--head-only", action="store_true",
                    help="fit only the length head (HeadStep), the rest of the model frozen")
    ap.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True,
                    help="torch.compile the training step")
    ap.add_argument("--bucket", action=argparse.BooleanOptionalAction, default=True,
                    help="batch examples by context width, each batch padded to its own width (compiled: one "
                         "graph with the sizes symbolic); --no-bucket pads every batch to the budget's width")
    ap.add_argument("--ema", type=float, default=None, metavar="DECAY",
                    help="keep an exponential moving average of the weights (e.g. 0.996) and save it as a model "
                         "directory, OUT/ema, at every checkpoint (training/averaging.py)")
    args = ap.parse_args(argv)
    if args.ema is not None:
        try:
            ema_decay(args.ema)          # before the model loads: the rule WeightEMA holds to
        except ValueError as e:
            ap.error(f"--ema: {e}")

    device = pick_device(args.device)
    amp_dtype = autocast_dtype(device)
    out = args.out = check_writable_folder(args.out)   # before any work: each save replaces the folder
    lock = hold_run(out)
    try:
        _run(ap, args, out, device, amp_dtype)
    finally:
        if lock is not None:
            lock.close()


def _run(ap: argparse.ArgumentParser, args: argparse.Namespace, out: Path, device, amp_dtype) -> None:
    """Train the run in `out` (main holds its lock)."""
    recover_swap(out)                    # a save stopped between its two renames (checkpoint.save_model)
    resuming = (out / "train_state.json").exists()
    if args.head_only and not resuming and args.init is None:     # before a tokenizer is trained for nothing
        ap.error("--head-only fits the length head of a trained model: start from one with --init and "
                 "--length-classes (or resume such a run)")
    train_files = read_split(args.data / "train.jsonl")
    if not train_files:
        raise ValueError(f"{args.data / 'train.jsonl'} holds no files to train on")
    if (out / "train_state.json").exists():
        model, tok = load_model(out, device=device)
        cfg = model.cfg
        if args.init is not None or args.preset != DEFAULT_PRESET:
            print(f"resuming the run in {out}: its own model, not --init/--preset", file=sys.stderr)
        if args.length_classes is not None and args.length_classes != cfg.length_classes:
            ap.error(f"--length-classes {args.length_classes}: the run in {out} has {cfg.length_classes}; "
                     f"a length head is added only when a run starts (--init)")
    elif args.init is not None:
        model, tok = load_model(args.init, device=device, dtype=torch.float32)
        cfg = model.cfg
        out.mkdir(parents=True, exist_ok=True)
        if args.length_classes is not None and args.length_classes != cfg.length_classes:
            if model.length_head is not None:
                ap.error(f"--length-classes {args.length_classes}: {args.init} has a length head of "
                         f"{cfg.length_classes} classes already")
            model.add_length_head(args.length_classes)
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
    shipped = (log_records((args.init / "train_log.jsonl").read_text())
               if args.init is not None and (args.init / "train_log.jsonl").exists() else [])
    if shipped and not (out / "train_state.json").exists():
        # continue the shipped run's count and schedule: its log comes along, data order is new
        (out / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in shipped))
        last = shipped[-1]
        state.update(step=last["step"], tokens=last["tokens"], seconds=last["time"])
        if args.new_schedule:     # the warm-up and cosine over --total-steps start at the shipped run's last step
            state["schedule_start"] = last["step"]
        stream.rng.seed(args.seed + last["step"])
        gen.manual_seed(args.seed + last["step"])
    if (out / "train_state.json").exists():
        state = load_train_state(out, opt)
        stream.rng.setstate(_tuple(state["stream_rng"]))
        gen.manual_seed(args.seed + state["step"])
        print(f"resumed at step {state['step']} ({state['tokens'] / 1e6:.1f}M tokens)", file=sys.stderr)
    span_rng = random.Random(args.seed + state["step"])
    ema = WeightEMA(model, args.ema) if args.ema is not None else None
    if ema is not None and (out / "train_state.json").exists() and not ema.load(out):
        print(f"{out} has no average yet: it starts from the step {state['step']} weights", file=sys.stderr)
    log_path = out / "train_log.jsonl"
    if log_path.exists():  # drop records of steps after the checkpoint we resumed from
        kept = [r for r in log_records(log_path.read_text()) if r["step"] <= state["step"]]
        log_path.write_text("".join(json.dumps(r) + "\n" for r in kept))
    log = log_path.open("a")
    if args.head_only and (model.length_head is None or (args.init is None and state["step"] == 0)):
        ap.error("--head-only fits the length head of a trained model: start from one with --init and "
                 "--length-classes (or resume such a run)")
    step = (HeadStep(model, opt, device, amp_dtype) if args.head_only
            else TrainStep(model, opt, device, amp_dtype, args.compile, dynamic=args.bucket))
    # unbucketed and compiled: pad every batch to the budget's width so each span length is one shape
    min_width = context_width_for(budget.total) if args.compile and not args.bucket else 0
    batches = BatchStream(stream, args.batch, tok.special, gen, args.bucket, min_width)
    start = last_save = time.time()
    seconds_before = state["seconds"]

    def checkpoint():
        nonlocal log
        state["seconds"] = seconds_before + time.time() - start
        state["stream_rng"] = stream.rng.getstate()
        log.close()                      # reopened in the folder the save leaves (a copy, where no hard links)
        save_model(out, model, tok)
        if ema is not None:
            ema.save(out, tok, state["step"])
        save_train_state(out, opt, state)
        log = log_path.open("a")

    stop = []

    def stopping(signum, _frame):        # save, then exit; a second Ctrl-C interrupts at once
        stop.append(True)
        if signum == signal.SIGINT:
            print("\nstopping: the run saves after this step (Ctrl-C again: stop without saving)", file=sys.stderr)
            signal.signal(signal.SIGINT, handlers[signal.SIGINT])
    # Ctrl-C only where it would interrupt (a job a script runs in the background ignores it, and goes on)
    ours = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else [])
    handlers = {sig: signal.signal(sig, stopping) for sig in ours}
    try:
        first = state.get("schedule_start", 0)
        while state["step"] - first < args.total_steps and not stop:
            t0 = time.time()
            lr = lr_at(state["step"] - first, args.total_steps, args.lr, args.warmup)
            for group in opt.param_groups:
                group["lr"] = lr
            L = span_rng.choices([l for l, _ in SPAN_LENGTHS], weights=[w for _, w in SPAN_LENGTHS])[0]
            result = step([batches.next(L) for _ in range(args.accum)])
            if ema is not None:
                ema.update(model)
            tokens = result["tokens"]
            state["step"] += 1
            state["tokens"] += tokens
            dt = time.time() - t0
            losses = {name: round(result[name], 4) for name in LOSSES if name in result}
            record = {"step": state["step"], "tokens": state["tokens"], **losses, "lr": lr,
                      "grad_norm": round(result["grad_norm"], 3), "span_length": L, "tokens_per_s": round(tokens / dt),
                      "time": round(seconds_before + time.time() - start, 1)}
            log.write(json.dumps(record) + "\n")
            log.flush()
            shown = " ".join(f"{name.split('_')[0]} {value:.3f}" for name, value in losses.items())
            print(f"\rstep {state['step']} ({state['step'] - first}/{args.total_steps}) "
                  f"{state['tokens'] / 1e6:.2f}M tok {shown} lr {lr:.2e} {tokens / dt:.0f} tok/s", end="",
                  file=sys.stderr)
            if time.time() - last_save > args.save_minutes * 60:
                checkpoint()
                last_save = time.time()
            if time.time() - start > args.minutes * 60:
                break
        checkpoint()
        print(f"\nsaved {out} at step {state['step']}", file=sys.stderr)
    finally:
        for sig, handler in handlers.items():     # a caller's own (tests call main in their process)
            signal.signal(sig, handler)


def _tuple(x):
    return tuple(_tuple(i) for i in x) if isinstance(x, list) else x


if __name__ == "__main__":
    main()
