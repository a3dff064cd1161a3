"""Latency of the public diffusion checkpoints (Dream/DiffuCoder 7B, Open-dCoder 0.5B, CoDA 1.7B,
LLaDA 8B) at their real shapes, with random weights made in place: no download, and latency does
not depend on the weights' values when the steps are fixed.

    python benchmarks/families.py                                   # the 0.5B shape, on the CPU
    python benchmarks/families.py --device cuda --shapes all        # every shape on a GPU (~3-5 min on an H100-class GPU)
    bash benchmarks/gpu.sh families                                 # the same on a fresh GPU machine (sets up Python first)

Per shape, with the span L=32 and a context of --context tokens (three quarters before the cursor):
  prefill           one full forward over the whole prompt (the first step of every completion)
  prefill, typed    the same after one more typed token, with the prefix's keys reused (approximate)
  span step         one window step (the span, plus the position before it for shifted families)
                    against the dual cache: hidden states
  head + pick       the vocabulary projection of the span's rows, the banned-ids bias and the greedy pick
  completion T      a whole completion of T in {2, 4, 8} steps, fixed length and `fixed` rule (exactly
                    T steps), with the dual cache (1 prefill + T-1 span steps) and without it (T full
                    forwards); tokens/s = L / the completion's time.
Medians and p95 over --repeats runs after warm-up; writes results/families[_DEVICE].json and .png.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import common  # noqa: E402
from common import summary, timed  # noqa: E402

from spanfill.engine import FAMILY_SHAPES, cpu_has_fast_bf16, random_family_engine  # noqa: E402

SPAN = 32
STEPS = (2, 4, 8)


def pick_dtype(device: str, name: str) -> torch.dtype:
    if name != "auto":
        return {"bf16": torch.bfloat16, "fp32": torch.float32}[name]
    return torch.bfloat16 if device.startswith("cuda") or cpu_has_fast_bf16() else torch.float32


def measure_shape(shape: str, device: str, dtype: torch.dtype, context: int, repeats: int, layers: int | None,
                  steps=STEPS) -> dict:
    engine = random_family_engine(shape, device, dtype, layers=layers, length="fixed", reuse_prefix=False)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, engine.tokenizer.vocab_size - 64, (context,), generator=gen).tolist()
    cut = context * 3 // 4
    prefix, suffix = ids[:cut], ids[cut:]
    lay = engine.layout(prefix, suffix, SPAN)
    rows = []

    def row(what: str, ms: list[float], **extra) -> None:
        rows.append({"what": what, **summary(ms), **extra})
        print(f"{shape:<18} {what:<34} median {rows[-1]['median_ms']:9.2f} ms  p95 {rows[-1]['p95_ms']:9.2f} ms"
              + "".join(f"  {k} {v}" for k, v in extra.items()), flush=True)

    with torch.inference_mode():
        row("prefill", timed(lambda: engine.full_forward([lay]), repeats), tokens=len(lay.ids))
        engine.reuse_prefix = True                    # the typed-one-more-token case: the prefix's keys reused
        _, recorder, _ = engine.full_forward([lay])
        engine.cache_for(1, lay).fill(recorder, 0, lay.context().to(engine.device))
        engine.keep_prefix(recorder, 0, lay)
        typed = engine.layout(prefix + [prefix[-1]], suffix, SPAN)
        reused = engine.prefixes.lookup(list(typed.ids), typed.window[0], typed.after)[0]
        row("prefill, typed (prefix reused)", timed(lambda: engine.full_forward([typed]), repeats),
            tokens=len(typed.ids) - reused)
        engine.reuse_prefix = False
        cache = engine.cache_for(1, lay)
        span = torch.full((1, SPAN), engine.special.mask, device=engine.device)
        row("span step", timed(lambda: engine.window_step(cache, lay, span), repeats),
            tokens=lay.window[1] - lay.window[0])
        hidden = engine.window_step(cache, lay, span)
        masked = torch.ones(1, SPAN, dtype=torch.bool, device=engine.device)
        row("head + pick (span rows)", timed(lambda: engine.pick(hidden, masked, None, None, engine.bias), repeats),
            tokens=SPAN, vocab=engine.backbone.shape.vocab_size)
        for dual in (True, False):
            engine.dual_cache = dual
            for T in steps:
                outs = []
                ms = timed(lambda: outs.append(engine.infill_ids(prefix, suffix, SPAN, T, rule="fixed")),
                           max(2, repeats // 2) if not dual else repeats)
                median = sorted(ms)[len(ms) // 2]
                row(f"completion T={T}, {'dual cache' if dual else 'no cache'}", ms, steps=T,
                    dual_cache=dual, forward_passes=outs[-1].forwards, tokens_per_s=round(SPAN / (median / 1e3), 1))
    info = engine.info
    del engine, cache, recorder
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"shape": shape, "family": info["family"], "config": FAMILY_SHAPES[shape][1], "params": info["params"],
            "layers": layers, "dtype": info["dtype"], "device": info["device"], "cuda_graphs": info["cuda_graphs"],
            "context_tokens": context, "span_length": SPAN, "rows": rows}


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shapes = report["shapes"]
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.6), squeeze=False)
    for ax, result in zip(axes[0], shapes):
        for dual, style in ((True, "o-"), (False, "s--")):
            pts = [(r["steps"], r["median_ms"]) for r in result["rows"] if r.get("dual_cache") is dual]
            if not pts:
                continue
            ax.plot(*zip(*pts), style, label="dual cache" if dual else "no cache")
        ax.set_title(f"{result['shape']} ({result['dtype']}, {result['device']})", fontsize=9)
        ax.set_xlabel("steps T (L=32)")
        ax.set_ylabel("ms per completion")
        ax.set_xticks(sorted({r['steps'] for r in result['rows'] if 'steps' in r}))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/families.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="open-dcoder-0.5b", help=f"comma-separated, or all: {', '.join(FAMILY_SHAPES)}")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", choices=("auto", "bf16", "fp32"), default="auto",
                    help="auto: bf16 on CUDA and on CPUs with fast bf16, else fp32")
    ap.add_argument("--context", type=int, default=None, help="prompt tokens besides the span (default 256 on CPU, 1024 on CUDA)")
    ap.add_argument("--repeats", type=int, default=None, help="timed runs per row (default 5 on CPU, 20 on CUDA)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    ap.add_argument("--layers", type=int, default=None, help="override the depth (smoke tests)")
    ap.add_argument("--steps", default=",".join(map(str, STEPS)), help="comma-separated T values")
    ap.add_argument("--out", type=Path, default=None, help="results directory (default: benchmarks/results)")
    args = ap.parse_args(argv)
    cuda = args.device.startswith("cuda")
    if args.threads:
        torch.set_num_threads(args.threads)
    shapes = list(FAMILY_SHAPES) if args.shapes == "all" else args.shapes.split(",")
    context = args.context or (1024 if cuda else 256)
    repeats = args.repeats or (20 if cuda else 5)
    dtype = pick_dtype(args.device, args.dtype)
    steps = tuple(int(t) for t in args.steps.split(","))
    results = [measure_shape(s, args.device, dtype, context, repeats, args.layers, steps) for s in shapes]
    if args.out:
        common.RESULTS = args.out
    name = "families" + ("_" + args.device.replace(":", "") if cuda else "")
    report = {"date": date.today().isoformat(), "command": "python benchmarks/families.py " + " ".join(argv or sys.argv[1:]),
              "weights": "random, made in place (latency only)", "device": args.device,
              "dtype": str(dtype).replace("torch.", ""), "shapes": results}
    path = common.write(name, report)
    plot(json.loads(path.read_text()), path.with_suffix(".png"))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
