"""How close is one denoising step to what this machine can do?

    python benchmarks/limit.py [--model DIR] [--span 32] [--context 450]

Measures, in one run: the time of one span step (L tokens against a cached context of C tokens,
plus the logits of all L positions), the machine's memory read bandwidth and its matmul rate in the
model's dtype, and reports the step time against two lower bounds: streaming every weight once from
memory (also with the cached keys and values the step's attention reads), and the step's FLOPs at
the measured matmul rate. Memory is read twice: a 512 MB array (DRAM), and an array the size of the
weights, which stays in the last-level cache when the weights would (a small model can live there
between steps); the second is the tighter, honest bound for a model that fits. On a CPU it also
profiles the step and splits its time into attention (the SDPA kernel), the other kernels (the
compiled graph's matmuls and fused loops, or the eager matmuls) and the rest (Dynamo's guards, the
graph call, the cache views; eager: also the small ops): where the step spends what the bounds do
not cover. Writes results/limit.json.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import compiled_step, load_engine, summary, timed, write  # noqa: E402


def read_bandwidth_gbs(dtype, mb: float = 512) -> float:
    x = torch.ones(int(mb * 2**20) // torch.finfo(dtype).bits * 8, dtype=dtype)
    ms = statistics.median(timed(lambda: x.sum(), repeats=10 if mb >= 64 else 100))
    return x.numel() * x.element_size() / (ms / 1e3) / 1e9


def matmul_gflops(dtype, n: int = 2048) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    ms = statistics.median(timed(lambda: a @ b, repeats=10))
    return 2 * n**3 / (ms / 1e3) / 1e9


ATTENTION_OPS = ("scaled_dot_product",)
# the compiled graph's own time is its C++ kernels; oneDNN's packed linears and aten's matmuls run
# where a graph keeps an aten matmul (or in the eager step)
KERNEL_ROWS = ("## Call CompiledFxGraph", "mkldnn::", "aten::mm", "aten::addmm", "aten::bmm", "aten::linear")


def step_breakdown(step, steps: int = 20) -> dict:
    """Milliseconds per step, from the profiler's self times: `attention` (SDPA), `kernels` (the
    compiled graph's C++ kernels and the matmul operators), `other` (the rest: Dynamo's guards and
    wrappers, cache views, allocations; in the eager step also its small ops). `profiled_ms` is
    their sum, which differs from the timed median (the profiler's own cost, a different sample);
    read the parts as shares of it."""
    from torch.profiler import ProfilerActivity, profile
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
    parts = {"attention": 0.0, "kernels": 0.0, "other": 0.0}
    for row in prof.key_averages():
        us = row.self_cpu_time_total
        if any(op in row.key for op in ATTENTION_OPS):
            parts["attention"] += us
        elif row.key.startswith(KERNEL_ROWS):
            parts["kernels"] += us
        else:
            parts["other"] += us
    out = {k: round(v / steps / 1e3, 3) for k, v in parts.items()}
    out["profiled_ms"] = round(sum(parts.values()) / steps / 1e3, 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None)
    ap.add_argument("--span", type=int, default=32)
    ap.add_argument("--context", type=int, default=450)
    ap.add_argument("--eager", action="store_true", help="time the eager step only")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, args.eager)
    model, cfg = engine.model, engine.model.cfg
    dtype = model.embed.weight.dtype
    L, C = args.span, args.context
    with torch.inference_mode():
        kv = engine.cache.allocate(C + L)
        model.encode_context(torch.randint(10, cfg.vocab_size, (1, C)), 0, kv)
    span = torch.full((1, L), engine.tokenizer.special.mask)

    def eager_step():
        with torch.inference_mode():
            model.logits(model.span_step(span, C, kv))
    eager_ms = summary(timed(eager_step, repeats=50, warmup=5))
    step_ms = eager_ms
    if engine.info["compiled"]:   # the step the engine runs: compiled, with the greedy pick and the commit
        step_ms = summary(timed(compiled_step(engine, span, C, kv), repeats=50, warmup=5))

    breakdown = None
    if model.embed.weight.device.type == "cpu":
        breakdown = step_breakdown(compiled_step(engine, span, C, kv) if engine.info["compiled"] else eager_step)

    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    # what the step reads besides the weights: every layer's cached keys and values, context and span
    kv_bytes = 2 * cfg.n_layers * (C + L) * cfg.dim * kv[0][0].element_size()
    embed = cfg.vocab_size * cfg.dim
    block_params = model.num_params() - embed - cfg.dim
    flops = (2 * block_params * L                                   # projections and MLP
             + 4 * L * (C + L) * cfg.dim * cfg.n_layers             # scores and weighted values
             + 2 * L * cfg.dim * cfg.vocab_size)                    # logits (tied embedding)
    bandwidth = read_bandwidth_gbs(dtype)
    cached_bandwidth = read_bandwidth_gbs(dtype, weight_bytes / 2**20)
    rate = matmul_gflops(dtype)
    stream_ms = weight_bytes / (bandwidth * 1e9) * 1e3
    stream_kv_ms = (weight_bytes + kv_bytes) / (bandwidth * 1e9) * 1e3
    cached_ms = weight_bytes / (cached_bandwidth * 1e9) * 1e3
    flop_ms = flops / (rate * 1e9) * 1e3
    bound_ms = max(stream_ms, flop_ms)
    report = {"engine": engine.info, "span_length": L, "context_tokens": C, "step": step_ms, "eager_step": eager_ms,
              "weight_bytes": weight_bytes, "step_gflop": flops / 1e9, "read_bandwidth_gbs": round(bandwidth, 2),
              "weight_sized_read_bandwidth_gbs": round(cached_bandwidth, 2), "weight_read_bound_ms": round(cached_ms, 3),
              "ratio_to_weight_read_bound": round(step_ms["median_ms"] / cached_ms, 2),
              "matmul_gflops": round(rate, 1), "weight_stream_bound_ms": round(stream_ms, 3),
              "flop_bound_ms": round(flop_ms, 3),
              "ratio_to_weight_stream_bound": round(step_ms["median_ms"] / stream_ms, 2),
              "kv_bytes": kv_bytes, "weight_and_kv_stream_bound_ms": round(stream_kv_ms, 3),
              "ratio_to_weight_and_kv_stream_bound": round(step_ms["median_ms"] / stream_kv_ms, 2),
              "ratio_to_flop_bound": round(step_ms["median_ms"] / flop_ms, 2),
              "ratio_to_tighter_bound": round(step_ms["median_ms"] / bound_ms, 2), "step_breakdown_ms": breakdown}
    print(f"step (L={L}, C={C}, {dtype}, {'compiled' if engine.info['compiled'] else 'eager'}): "
          f"median {step_ms['median_ms']:.2f} ms, p95 {step_ms['p95_ms']:.2f} ms (eager {eager_ms['median_ms']:.2f} ms)")
    print(f"weights {weight_bytes / 1e6:.1f} MB at {bandwidth:.1f} GB/s -> {stream_ms:.3f} ms "
          f"(step is {report['ratio_to_weight_stream_bound']}x); a weight-sized array reads at "
          f"{cached_bandwidth:.1f} GB/s -> {cached_ms:.3f} ms (step is {report['ratio_to_weight_read_bound']}x)")
    print(f"with the {kv_bytes / 1e6:.1f} MB of cached keys and values the step reads: {stream_kv_ms:.3f} ms "
          f"(step is {report['ratio_to_weight_and_kv_stream_bound']}x)")
    print(f"{flops / 1e9:.3f} GFLOP at {rate:.0f} GFLOP/s -> {flop_ms:.3f} ms (step is {report['ratio_to_flop_bound']}x)")
    if breakdown:
        print("profiled step: " + ", ".join(f"{k} {v:.3f} ms" for k, v in breakdown.items()))
    print(f"wrote {write('limit', report)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
