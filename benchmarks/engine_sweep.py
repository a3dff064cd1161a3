"""Engine sweep: latency, tokens/s and exact match for span length L in {16, 32, 64} x steps T in
{1, 2, 4, 8} and the threshold rule, beside AR decoding of the same weights and Hugging Face
`generate()` on the Llama export of the same weights, on held-out single-line infill tasks, in one run.

    python benchmarks/engine_sweep.py [--model DIR] [--data data/] [--tasks 100]

spanfill modes are timed with the task's context already in the KV cache (as while typing: the
server's reuse rate is in the replay benchmark) and also cold for T=4 and AR; `generate()` has no
cross-request cache, so it is timed cold (prefill + decode) — the cold rows are the like-for-like
comparison. Diffusion's text is the span's own (check=None: benchmarks/check.py measures the AR check).
Writes results/engine_sweep.json and .png.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from common import RESULTS, load_engine, write  # noqa: E402

from spanfill.engine import (build_tasks, export_llama, generate_completion, read_split, score,  # noqa: E402
                             score_text, summarise, warm)


def row(name, kind, L, T, scores, tokens):
    """A result row: the scorer's summary, and tokens per second of decoding (the text's tokens and eom)."""
    return {"name": name, "kind": kind, "span_length": L, "steps": T, **summarise(scores),
            "tokens_per_s": round(sum(tokens) / (sum(s.latency_ms for s in scores) / 1e3), 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="checkpoint dir (default: the shipped model)")
    ap.add_argument("--data", type=Path, default=Path("data"), help="`spanfill data` output with held_out.jsonl")
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--spans", default="16,32,64")
    ap.add_argument("--no-hf", action="store_true", help="skip the transformers generate() baseline")
    ap.add_argument("--eager", action="store_true", help="do not compile the CPU steps")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, args.eager)
    tok = engine.tokenizer
    spans = [int(x) for x in args.spans.split(",")]
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.tasks, 0, tok, min(spans))
    configs = []
    for L in spans:
        configs += [(f"diffusion L={L} T={T}", "warm", L, T, "diffusion", "content") for T in (1, 2, 4, 8)]
        if L == 32:
            configs.append(("diffusion L=32 T=4, fixed rule", "warm", L, 4, "diffusion", "fixed"))
        configs.append((f"diffusion L={L} threshold 0.9", "warm", L, 8, "diffusion", "threshold"))
        configs.append((f"AR L={L}", "warm", L, None, "ar", "content"))
    configs += [("diffusion L=32 T=4", "cold", 32, 4, "diffusion", "content"),
                ("AR L=32", "cold", 32, None, "ar", "content")]
    llama = None
    if not args.no_hf:
        from transformers import LlamaForCausalLM
        llama_dir = export_llama(args.model, Path(tempfile.mkdtemp()) / "llama")
        llama = LlamaForCausalLM.from_pretrained(llama_dir, dtype=engine.model.embed.weight.dtype).eval()
    results: dict[tuple, list] = {}
    tokens: dict[tuple, list] = {}
    agree = 0   # tasks where generate() wrote exactly what spanfill's AR mode wrote
    for i, task in enumerate(tasks):
        for name, kind, L, T, mode, rule in configs:
            if kind == "cold":
                engine.cache.clear()
            else:
                warm(engine, task)
            s = score(engine, task, span_length=L, steps=T, mode=mode, rule=rule, check=None)
            if (name, kind) == ("AR L=32", "cold"):
                ar_text = s.text
            results.setdefault((name, kind, L, T), []).append(s)
            tokens.setdefault((name, kind, L, T), []).append(len(tok.encode(s.text)) + 1)
        if llama is not None:
            t0 = time.perf_counter()
            with torch.inference_mode():
                text, n_tokens = generate_completion(llama, engine, task.prefix, task.suffix, 32)
            key = ("transformers generate() L=32", "cold", 32, None)
            results.setdefault(key, []).append(score_text(task, text, (time.perf_counter() - t0) * 1e3, n_tokens))
            tokens.setdefault(key, []).append(n_tokens)
            agree += text == ar_text
        print(f"\r{i + 1}/{len(tasks)}", end="", file=sys.stderr)
    print(file=sys.stderr)
    rows = [row(*key, scores, tokens[key]) for key, scores in results.items()]
    for r in rows:
        print(f"{r['name']:<32} {r['kind']:<5} p50 {r['latency_median_ms']:8.2f} ms  p95 {r['latency_p95_ms']:8.2f} ms  "
              f"{r['tokens_per_s']:8.1f} tok/s  EM {r['exact_match']:.1%}  ES {r['edit_similarity']:.3f}")
    if llama is not None:
        print(f"generate() == spanfill AR mode on {agree}/{len(tasks)} tasks")
    path = write("engine_sweep", {"engine": engine.info, "tasks": len(tasks), "rows": rows,
                                  "generate_equals_ar": None if llama is None else agree / len(tasks),
                                  "command": "python benchmarks/engine_sweep.py " + " ".join(sys.argv[1:] if argv is None else argv)})
    plot(rows, RESULTS / "engine_sweep.png")
    print(f"wrote {path}")
    return 0


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5))
    for r in rows:
        marker = "s" if "AR" in r["name"] else ("^" if "generate" in r["name"] else "o")
        ax.scatter(r["latency_median_ms"], r["exact_match"] * 100, marker=marker, alpha=0.8)
        ax.annotate(f"{r['name']} ({r['kind']})", (r["latency_median_ms"], r["exact_match"] * 100), fontsize=6,
                    textcoords="offset points", xytext=(4, 3))
    ax.set_xscale("log")
    ax.set_xlabel("median latency per completion (ms, log)")
    ax.set_ylabel("exact match, held-out single-line (%)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
