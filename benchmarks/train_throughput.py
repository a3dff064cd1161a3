"""Training throughput: tokens/s and model FLOP utilisation of a training step (forward, backward,
clipping, the AdamW update) in several configurations, alternating round by round in one process so
each sees the same machine: eager against compiled loss function, fp32 against bf16 autocast (where
the CPU has fast bf16 or on CUDA), batches padded to the budget's fixed width against batches
bucketed by context width, and batch sizes. Real training examples (the train split, the shipped
tokenizer) on a freshly initialised preset model; writes results/train_throughput.json.

    python benchmarks/train_throughput.py --data /work/data

`before` is the step `spanfill train` ran before bucketing (compiled per shape, fixed width, AdamW
with foreach, the SDPA kernel, logits at every position); `after` is today's (bucketed, fused AdamW,
on the CPU `biased_attention`, the vocabulary projection only where a loss is). Tokens are those the
loss sees (causal tokens with a target and the noised span), as `spanfill train` counts them; positions include padding. Model FLOPs: 6 x
the layers' matmul parameters x positions, 6 x the vocabulary projection's parameters x the
positions with a loss, plus the attention scores (12 x layers x B x S^2 x dim, the whole mask, as
both attention forms compute it), per step; utilisation is against a large matmul in the same
dtype timed in the same process.
"""
from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import write  # noqa: E402

from spanfill.engine import (DEFAULT_MODEL_DIR, PRESETS, BatchStream, Budget, ExampleStream, SpanfillModel,  # noqa: E402
                             Tokenizer, TrainStep, autocast_dtype, context_width_for, make_optimizer, read_split)


@dataclass(frozen=True)
class Setting:
    name: str
    compiled: bool
    bf16: bool
    bucketed: bool
    batch: int
    fused_adamw: bool = True
    fused_attention: bool = False     # the SDPA kernel, or (False) biased_attention; on CUDA always SDPA
    sparse: bool = True               # logits only where a loss is (sparse_loss_terms)

    def sdpa(self, device: torch.device) -> bool:
        """Whether this setting's attention is the SDPA kernel (always on CUDA)."""
        return self.fused_attention or device.type == "cuda"

    @property
    def graph(self) -> tuple:
        """Settings with equal keys share one loss function (and so one compiled graph)."""
        return (self.compiled, self.bf16, self.bucketed, self.fused_attention, self.sparse)


SETTINGS = [
    Setting("eager fp32, fixed width", False, False, False, 16, False, True, False),
    Setting("eager bf16, fixed width", False, True, False, 16, False, True, False),
    Setting("before: compiled bf16, fixed width", True, True, False, 16, False, True, False),
    Setting("compiled bf16, bucketed", True, True, True, 16, True, True, False),
    Setting("compiled bf16, bucketed, biased attention", True, True, True, 16, True, False, False),
    Setting("after: compiled bf16, bucketed, biased attention, sparse logits", True, True, True, 16),
    Setting("after, batch 32", True, True, True, 32),
]


def model_flops(cfg, batch: int, positions: int, loss_positions: int) -> float:
    """Forward + backward FLOPs of one batch of [batch, positions]: the layers' matmuls (6 per parameter
    per position), the vocabulary projection at the loss_positions (those with a loss: its work
    anywhere else is waste, whether a setting does it or not) and attention scores over the whole mask."""
    d, f = cfg.dim, cfg.ffn_dim
    layer_params = cfg.n_layers * (4 * d * d + 3 * d * f)
    return (6.0 * layer_params * batch * positions + 6.0 * cfg.vocab_size * d * loss_positions
            + 12.0 * cfg.n_layers * batch * positions ** 2 * d)


def matmul_peak(dtype: torch.dtype, device: torch.device, n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of an n x n x n matmul in dtype: the machine's attainable rate, as this process sees it."""
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    times = []
    for _ in range(repeats + 1):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return 2.0 * n ** 3 / statistics.median(times[1:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("data"), help="`spanfill data` output (train.jsonl is read)")
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--span-lengths", type=int, nargs="+", default=[32], help="cycled step by step (training mixes 16/32/64)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per setting per round")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps per setting first (compiling included)")
    ap.add_argument("--files", type=int, default=3000, help="train files to draw examples from")
    ap.add_argument("--settings", nargs="+", type=int, default=None, help="indices into SETTINGS (default: all)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    fast_bf16 = autocast_dtype(device) is not None
    settings = [SETTINGS[i] for i in args.settings] if args.settings else SETTINGS
    settings = [s for s in settings if fast_bf16 or not s.bf16]
    if not settings:
        print("no setting runs on this machine (all need fast bf16)")
        return 1

    tok = Tokenizer.from_file(DEFAULT_MODEL_DIR / "tokenizer.json")
    files = read_split(args.data / "train.jsonl")
    files = random.Random(0).sample(files, min(args.files, len(files)))
    cfg = dataclasses.replace(PRESETS[args.preset], vocab_size=max(PRESETS[args.preset].vocab_size, tok.vocab_size))
    cfg.special_tokens = {name: getattr(tok.special, name) for name in tok.special.__dataclass_fields__}
    torch.manual_seed(0)
    model = SpanfillModel(cfg).to(device).train()

    steps, streams, stats = {}, {}, {}
    for s in settings:
        graph = next((steps[o].loss_fn for o in steps if o.graph == s.graph), None)
        opt = make_optimizer(model, 1e-4, device) if s.fused_adamw else torch.optim.AdamW(model.parameters(), lr=1e-4)
        step = TrainStep(model, opt, device, torch.bfloat16 if s.bf16 else None, s.compiled, dynamic=s.bucketed,
                         sparse=s.sparse, fused_attention=s.sdpa(device))
        if graph is not None:
            step.loss_fn = graph
        steps[s] = step
        # the same examples in the same order for every setting
        streams[s] = BatchStream(ExampleStream(tok, files, Budget(), seed=0), s.batch, tok.special,
                                 torch.Generator().manual_seed(0), s.bucketed,
                                 0 if s.bucketed else context_width_for(Budget().total))
        stats[s] = {"seconds": 0.0, "tokens": 0, "positions": 0, "flops": 0.0, "steps": 0, "step_ms": []}
    span_lengths = iter(range(10 ** 9))

    def run(s: Setting, timed: bool) -> None:
        L = args.span_lengths[next(span_lengths) % len(args.span_lengths)]
        batch = streams[s].next(L)
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = steps[s]([batch])          # .item() inside waits for the device
        dt = time.perf_counter() - t0
        if timed:
            st = stats[s]
            st["seconds"] += dt
            st["tokens"] += out["tokens"]
            st["positions"] += batch.tokens.numel()
            st["flops"] += model_flops(cfg, *batch.tokens.shape, sum(len(i) for i in batch.loss_index))
            st["steps"] += 1
            st["step_ms"].append(dt * 1e3)

    warmup_s = {}
    for s in settings:
        t0 = time.perf_counter()
        for _ in range(args.warmup):
            run(s, timed=False)
        warmup_s[s] = time.perf_counter() - t0
        print(f"warmed up {s.name} in {warmup_s[s]:.0f} s", file=sys.stderr)
    for r in range(args.rounds):
        order = settings[r % len(settings):] + settings[:r % len(settings)]
        for s in order:
            for _ in range(args.steps):
                run(s, timed=True)
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)

    peaks = {"bf16": matmul_peak(torch.bfloat16, device) if fast_bf16 else None,
             "fp32": matmul_peak(torch.float32, device)}
    rows = []
    for s in settings:
        st = stats[s]
        flops_per_s = st["flops"] / st["seconds"]
        peak = peaks["bf16" if s.bf16 else "fp32"]
        rows.append({"setting": s.name, "compiled": s.compiled, "autocast": "bf16" if s.bf16 else "fp32",
                     "bucketed": s.bucketed, "batch": s.batch, "fused_adamw": s.fused_adamw,
                     "attention": "sdpa" if s.sdpa(device) else "biased",
                     "logits": "sparse" if s.sparse else "dense", "steps": st["steps"],
                     "tokens_per_s": st["tokens"] / st["seconds"], "positions_per_s": st["positions"] / st["seconds"],
                     "padding": 1 - st["tokens"] / st["positions"], "step_median_ms": statistics.median(st["step_ms"]),
                     "model_tflops_per_s": flops_per_s / 1e12, "mfu": flops_per_s / peak, "warmup_s": warmup_s[s]})
    base = next((r for r in rows if r["setting"].startswith("before")), rows[0])
    for r in rows:
        r["speedup_vs_before"] = r["tokens_per_s"] / base["tokens_per_s"]
        print(f"{r['setting']:<66} {r['tokens_per_s']:7.0f} tok/s  {r['positions_per_s']:7.0f} pos/s  "
              f"padding {r['padding']:.0%}  step {r['step_median_ms']:6.0f} ms  MFU {r['mfu']:.1%}  "
              f"x{r['speedup_vs_before']:.2f}  (warm-up {r['warmup_s']:.0f} s)")
    out = write("train_throughput", {
        "preset": args.preset, "params": model.num_params(), "span_lengths": args.span_lengths,
        "rounds": args.rounds, "steps_per_round": args.steps, "matmul_peak_tflops": {k: v and v / 1e12 for k, v in peaks.items()},
        "rows": rows, "command": "python benchmarks/train_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
