"""GPU latency sweep (benchmarks/gpu.sh runs it): Engine.complete on CUDA for span length L in
{16, 32, 64} x steps T in {1, 2, 4, 8}, both through the captured CUDA graphs (the engine's CUDA path,
engine/decoding/cuda_step.py) and through the eager reference loop, beside AR decoding of the same weights, in
one run; then the fused confidence kernel against the torch softmax + max it replaces.

    python benchmarks/gpu_sweep.py --out DIR [--repeats 30]

Uses the shipped model if engine/default_model holds one, else random weights in the shipped "small"
config: latency does not depend on the weights, except that a span or an AR decode ends at <|eom|>,
so every row records the steps it ran. The context is this repository's engine/decoding/denoise.py with the
cursor mid-file, cut by the server's context builder, and it stays cached between runs, as while typing.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, summary, timed  # noqa: E402

from spanfill.engine import (DEFAULT_MODEL_DIR, PRESETS, CompletionRequest, Engine, SpanfillModel,  # noqa: E402
                             kernels, save_model, train_tokenizer)

REPO = Path(__file__).resolve().parents[1]


def random_small_model(directory: Path) -> Path:
    texts = [p.read_text() for p in sorted((REPO / "engine").glob("*.py")) + sorted((REPO / "server").glob("*.py"))]
    tok = train_tokenizer(iter(texts), PRESETS["small"].vocab_size)
    special = {name: getattr(tok.special, name) for name in tok.special.__dataclass_fields__}
    cfg = dataclasses.replace(PRESETS["small"], special_tokens=special)
    torch.manual_seed(0)
    save_model(directory, SpanfillModel(cfg), tok)
    return directory


def engine_rows(engine: Engine, spans, steps, repeats: int) -> list[dict]:
    source = (REPO / "engine" / "decoding" / "denoise.py").read_text()
    cursor = source.index("\n", len(source) // 2) + 1     # a line start mid-file
    base = dict(prefix=source[:cursor], suffix=source[cursor:])
    rows = []

    def measure(req: CompletionRequest, **labels) -> dict:
        results = []
        ms = timed(lambda: results.append(engine.complete(req)), repeats)
        last = results[-1]
        denoise_ms = statistics.median(r.timings.denoise_ms for r in results)
        row = {**labels, **summary(ms), "denoise_median_ms": round(denoise_ms, 3), "steps_run": last.steps_run,
               "context_tokens": last.context_tokens}
        print(json.dumps(row), flush=True)
        return row

    for L in spans:
        ar = measure(CompletionRequest(**base, span_length=L, mode="ar"), mode="ar", span_length=L)
        rows.append(ar)
        for T in steps:
            for path, fast in (("cuda_graphs", True), ("eager", False)):
                req = CompletionRequest(**base, span_length=L, steps=T, fast_steps=fast)
                row = measure(req, mode="diffusion", path=path, span_length=L, steps=T)
                row["speedup_vs_ar"] = round(ar["median_ms"] / row["median_ms"], 2)
                rows.append(row)
    return rows


def kernel_rows(vocab: int, banned: list[int]) -> list[dict]:
    rows = []
    for M in (16, 64, 256):
        logits = torch.randn(M, vocab, device="cuda", dtype=torch.bfloat16)

        def torch_pick():
            x = logits.float()
            x[:, banned] = float("-inf")
            return torch.softmax(x, dim=-1).max(dim=-1)

        for name, fn in (("triton_confidence_argmax", lambda: kernels.confidence_argmax(logits, banned)),
                         ("torch_softmax_max", torch_pick)):
            ms = timed(lambda: [fn() for _ in range(100)], repeats=10)
            rows.append({"op": name, "rows": M, "vocab": vocab, "us_per_call": round(statistics.median(ms) * 10, 2)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "gpu")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_sweep: CUDA is not available to this torch build; nothing to measure", file=sys.stderr)
        return 2
    shipped = (DEFAULT_MODEL_DIR / "model.safetensors").is_file()
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine.load(None if shipped else random_small_model(Path(tmp) / "model"), device="cuda")
    if engine.static_denoiser is None or not engine.static_denoiser.graphs:
        print("gpu_sweep: the engine is not using CUDA graphs (is triton importable?)", file=sys.stderr)
    sp = engine.tokenizer.special
    banned = [sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle]   # the engine's diffusion ban list
    payload = {"machine": machine(), "model": "shipped" if shipped else "random weights, small config",
               "engine": engine.info, "repeats": args.repeats,
               "engine_rows": engine_rows(engine, (16, 32, 64), (1, 2, 4, 8), args.repeats),
               "kernel_rows": kernel_rows(engine.model.cfg.vocab_size, banned)}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "gpu_latency.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
