"""Held-out evaluation: exact match, edit similarity and latency for diffusion at several step counts
and for AR decoding of the same weights, on infill tasks built deterministically from held-out files.

    spanfill eval --data data/ --model DIR --out benchmarks/results/eval.json

Tasks use the same cursor cutters as training (`examples.py`): single-line = rest of a line,
multi-line = 2-3 whole lines after the indentation of the first (only those whose middle fits the
span, since one span holds at most L-1 tokens + <|eom|>). Each task's context is encoded once and then
every mode decodes against the cached context, as while typing; latency is the whole `complete` call.

Two scores per completion: of the engine's raw middle (`exact_match`, `edit_similarity`), and of what
an editor would show after the server's post-processing (`shown_*`: line policy, suffix overlap,
brackets, indentation; server/postprocess.py), which is what a user sees.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .api import CompletionRequest
from .corpus import read_split
from .engine import Engine
from .examples import cut_line_rest, cut_lines
from spanfill.server.postprocess import Cursor, finish   # absolute: `python -m engine.ship` imports this too


@dataclass
class Task:
    task_id: str
    kind: str
    prefix: str
    middle: str
    suffix: str


def build_tasks(files, n_single: int, n_multi: int, tokenizer, span_length: int) -> list[Task]:
    tasks: list[Task] = []
    for kind, wanted in (("single", n_single), ("multi", n_multi)):
        made = 0
        for f in sorted(files, key=lambda f: hashlib.sha1(f.path.encode()).hexdigest()):
            if made >= wanted:
                break
            rng = random.Random(f"{kind}:{f.path}")
            for _ in range(max(1, wanted // max(1, len(files)) + 1)):
                cut = cut_line_rest(f.text, rng) if kind == "single" else cut_lines(f.text, rng, max_lines=3)
                if cut is None or not cut.middle.strip() or (kind == "multi" and "\n" not in cut.middle):
                    continue
                if len(tokenizer.encode(cut.middle)) >= span_length:
                    continue
                tasks.append(Task(f"{kind}/{f.path}#{made}", kind, cut.prefix, cut.middle, cut.suffix))
                made += 1
                if made >= wanted:
                    break
    return tasks


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def edit_similarity(a: str, b: str) -> float:
    if not a and not b:
        return 1.0
    return 1.0 - levenshtein(a, b) / max(len(a), len(b))


def exact(completion: str, middle: str) -> bool:
    return completion.rstrip() == middle.rstrip()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


# (mode, steps, commit rule); the default rule at every T, and the `fixed` rule beside it at T=2 and 4
MODES = [("diffusion", 1, "content"), ("diffusion", 2, "content"), ("diffusion", 4, "content"),
         ("diffusion", 8, "content"), ("diffusion", 2, "fixed"), ("diffusion", 4, "fixed"), ("ar", None, "content")]


def decoding_label(row: dict) -> str:
    """'AR', 'diffusion T=4', or 'diffusion T=4, fixed rule' for a result row: the default rule goes
    unnamed, and so do rows written before results recorded their rule."""
    if row["mode"] == "ar":
        return "AR"
    rule = row.get("rule", "content")
    return f"diffusion T={row['steps']}" + ("" if rule == "content" else f", {rule} rule")


def evaluate(engine: Engine, tasks: list[Task], span_length: int, modes=MODES, progress: bool = True) -> dict:
    rows: dict[tuple, list] = {}
    for i, task in enumerate(tasks):
        engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, span_length=span_length, steps=1))
        for mode, steps, rule in modes:
            req = CompletionRequest(prefix=task.prefix, suffix=task.suffix, span_length=span_length,
                                    steps=steps, mode=mode, rule=rule)
            t0 = time.perf_counter()
            result = engine.complete(req)
            ms = (time.perf_counter() - t0) * 1e3
            text = result.texts[0]
            shown = finish(text, Cursor(task.prefix, task.suffix)) or ""
            # its latency, and its scores, each named as the row's mean it goes into
            rows.setdefault((mode, steps, rule, task.kind), []).append((ms, {
                "forward_passes_mean": result.steps_run,
                "exact_match": exact(text, task.middle),
                "edit_similarity": edit_similarity(text.rstrip(), task.middle.rstrip()),
                "shown_exact_match": exact(shown, task.middle),
                "shown_edit_similarity": edit_similarity(shown.rstrip(), task.middle.rstrip()),
                # how long what the editor shows is, beside the reference: a model that ends its
                # completions too early (or runs on) shows here before it shows in EM
                "shown_chars_mean": len(shown.rstrip()), "reference_chars_mean": len(task.middle.rstrip())}))
        if progress and (i + 1) % 20 == 0:
            print(f"\r{i + 1}/{len(tasks)} tasks", end="", file=sys.stderr)
    if progress:
        print(file=sys.stderr)
    results = []
    for (mode, steps, rule, kind), vals in rows.items():
        lat = [ms for ms, _ in vals]
        means = {key: sum(scores[key] for _, scores in vals) / len(vals) for key in vals[0][1]}
        results.append({"mode": mode, "steps": steps, "rule": rule, "kind": kind, "span_length": span_length, "tasks": len(vals),
                        **means, "latency_median_ms": statistics.median(lat), "latency_p95_ms": percentile(lat, 95)})
    return {"model": engine.info, "results": results}


def plot(report: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, kind in zip(axes, ("single", "multi")):
        for r in report["results"]:
            if r["kind"] != kind:
                continue
            label = decoding_label(r).replace("diffusion ", "")
            ax.scatter(r["latency_median_ms"], r["exact_match"] * 100, s=50, marker="s" if r["mode"] == "ar" else "o")
            ax.annotate(label, (r["latency_median_ms"], r["exact_match"] * 100), textcoords="offset points", xytext=(5, 4))
        ax.set_xlabel("median latency per completion (ms)")
        ax.set_ylabel("exact match (%)")
        ax.set_title(f"{kind}-line infill, held-out files")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill eval", description="held-out infill evaluation")
    ap.add_argument("--data", type=Path, default=Path("data"), help="directory written by `spanfill data`")
    ap.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/eval.json"))
    ap.add_argument("--single", type=int, default=300)
    ap.add_argument("--multi", type=int, default=150)
    ap.add_argument("--span", type=int, default=None)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--eager", action="store_true", help="do not compile the CPU steps (compiling takes about two minutes on 2 cores)")
    ap.add_argument("--dtype", default="auto")
    args = ap.parse_args(argv)
    engine = Engine.load(args.model, device=args.device, dtype=args.dtype, compile=False if args.eager else None, wait=True)
    L = args.span or engine.model.cfg.span_length
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer, L)
    report = evaluate(engine, tasks, L)
    report["tasks"] = {"single": sum(t.kind == "single" for t in tasks), "multi": sum(t.kind == "multi" for t in tasks)}
    report["command"] = "spanfill eval " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    plot(report, args.out.with_suffix(".png"))
    for r in sorted(report["results"], key=lambda r: (r["kind"], r["mode"], r.get("rule", ""), r["steps"] or 0)):
        print(f"{r['kind']:<7} {decoding_label(r):<28} EM {r['exact_match']:.1%}  ES {r['edit_similarity']:.3f}  "
              f"shown EM {r['shown_exact_match']:.1%}  ES {r['shown_edit_similarity']:.3f}  "
              f"p50 {r['latency_median_ms']:.1f} ms  p95 {r['latency_p95_ms']:.1f} ms  passes {r['forward_passes_mean']:.1f}  "
              f"chars {r['shown_chars_mean']:.1f} (reference {r['reference_chars_mean']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
