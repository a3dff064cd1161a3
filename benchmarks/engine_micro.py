"""Micro-benchmark of the engine: per-step and per-completion latency for T in {1, 2, 4, 8} and for
AR decoding of the same weights, in one run, context already cached (as while typing).

    python benchmarks/engine_micro.py                # tiny random model (runs anywhere in seconds)
    python benchmarks/engine_micro.py --model DEFAULT  # the shipped model; or any checkpoint dir

Random weights finish spans at arbitrary points, so with the tiny model <|eom|> and pad are
suppressed: every completion then runs the full schedule and the figures are pure cost per step.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import compiled_step, load_engine, summary, timed, write  # noqa: E402

from spanfill.engine import SAMPLE_PREFIX, SAMPLE_SUFFIX, CompletionRequest, Engine, build_tiny_model  # noqa: E402

TYPED_TOKENS = 8   # about what a keystroke re-encodes in the replay (9.4 tokens per engine call)


def suppress_end(engine: Engine) -> None:
    sp, original = engine.tokenizer.special, engine.model.logits

    def logits(h):
        out = original(h)
        out[..., [sp.eom, sp.pad]] = float("-inf")
        return out
    engine.model.logits = logits


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="checkpoint dir, or DEFAULT for the shipped model (default: tiny random)")
    ap.add_argument("--span", type=int, default=None, help="span length (default: the model's; only it is compiled)")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--eager", action="store_true", help="do not compile the CPU steps")
    args = ap.parse_args(argv)
    if args.model is None:
        path = build_tiny_model(Path(tempfile.mkdtemp()) / "tiny")
        label = "tiny random"
    else:
        path = None if args.model == "DEFAULT" else args.model
        label = args.model
    engine = load_engine(path, args.eager, before_compile=suppress_end if args.model is None else None, dtype=args.dtype)
    L = args.span or engine.model.cfg.span_length
    ctx = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, span_length=L, steps=1))
    entry = engine.cache.entries[-1]
    kv = entry.kv
    span = torch.full((1, L), engine.tokenizer.special.mask, device=engine.model.embed.weight.device)

    def eager_step():
        with torch.inference_mode():
            engine.model.logits(engine.model.span_step(span, ctx.context_tokens, kv))

    with torch.inference_mode():   # encoding the whole context, as a request for a new file does
        tokens = torch.tensor([entry.tokens], device=span.device)
        scratch = engine.cache.allocate(entry.capacity)
        engine.model.encode_context(tokens, 0, scratch)
    # and the few tokens a keystroke re-encodes at the end of a cached context (token healing
    # re-encodes at least two)
    typed = min(TYPED_TOKENS, len(entry.tokens) - 1)
    with torch.inference_mode():   # a fresh tensor, as the cache makes it (a slice's strides would not match the graph's guards)
        tail = torch.tensor([entry.tokens[-typed:]], device=span.device)
        last = torch.tensor([entry.tokens[-1:]], device=span.device)

    def prefill(encode, ids, start):
        def run():
            with torch.inference_mode():
                encode(ids, start, scratch)
        return run

    rows = [{"what": f"span step (L={L}, +logits), eager", **summary(timed(eager_step, args.repeats))}]
    encoders = [("eager", engine.model.encode_context)]
    if engine.info["compiled"]:
        encoders.append(("compiled", engine.compiled.prefill))
    for how, encode in encoders:
        rows.append({"what": f"context prefill ({len(entry.tokens)} tokens), {how}",
                     **summary(timed(prefill(encode, tokens, 0), args.repeats))})
        rows.append({"what": f"typed-tail prefill ({typed} tokens after {len(entry.tokens) - typed}), {how}",
                     **summary(timed(prefill(encode, tail, len(entry.tokens) - typed), args.repeats))})
        rows.append({"what": f"one typed token's prefill (after {len(entry.tokens) - 1}), {how}",
                     **summary(timed(prefill(encode, last, len(entry.tokens) - 1), args.repeats))})
    if engine.info["compiled"]:   # the whole step the engine runs: forward, pick, commit
        step = compiled_step(engine, span, ctx.context_tokens, kv)
        rows.append({"what": f"span step (L={L}, +pick+commit), compiled", **summary(timed(step, args.repeats))})
        with torch.inference_mode():
            token = torch.tensor([[42]], device=span.device)

        def token_step():   # one AR token: what AR mode pays per token, beside the span step
            with torch.inference_mode():
                engine.compiled.token_step(token, ctx.context_tokens, kv)
        rows.append({"what": "AR token step (+logits), compiled", **summary(timed(token_step, args.repeats))})
    for mode, steps in [("diffusion", 1), ("diffusion", 2), ("diffusion", 4), ("diffusion", 8), ("ar", None)]:
        req = CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, span_length=L, steps=steps, mode=mode,
                                check=None)   # the span's steps alone: benchmarks/check.py times the check
        passes = engine.complete(req).steps_run
        name = f"completion AR ({passes} passes)" if mode == "ar" else f"completion T={steps}"
        rows.append({"what": name, "mode": mode, "steps": steps, "forward_passes": passes,
                     **summary(timed(lambda: engine.complete(req), args.repeats))})
    # every row names the T it ran; the checkpoint's default T (engine.info["steps"]) governs none of them
    info = {k: v for k, v in engine.info.items() if k != "steps"}
    print(f"model: {label} ({info['params'] / 1e6:.2f}M params, {info['dtype']}, {info['device']}), "
          f"context {ctx.context_tokens} tokens cached, L={L}")
    for r in rows:
        print(f"  {r['what']:<40} median {r['median_ms']:8.2f} ms   p95 {r['p95_ms']:8.2f} ms")
    out = write("engine_micro" + ("" if args.model is None else "_model"), {"model": label, "engine": info, "span_length": L,
                                                                            "context_tokens": ctx.context_tokens, "rows": rows})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
