"""Held-out evaluation: exact match, edit similarity and latency for diffusion at several step counts
and for AR decoding of the same weights, on infill tasks built deterministically from held-out files.

    spanfill eval --data data/ --model DIR --out benchmarks/results/eval.json

Tasks use the same cursor cutters as training (`training/samples.py`): single-line = rest of a line,
multi-line = 2-3 whole lines after the indentation of the first (only those whose middle fits the
span, since one span holds at most L-1 tokens + <|eom|>). Each task's context is encoded once and then
every mode decodes against the cached context, as while typing; latency is the whole `complete` call.

Two scores per completion: of the engine's raw middle (`exact_match`, `edit_similarity`), and of what
an editor would show after the server's post-processing (`shown_*`: line policy, suffix overlap,
brackets, indentation; decoding/postprocess.py), which is what a user sees.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..api import MAX_SPAN
from ..core.files import unwritable, write_whole
from ..engine import Engine
from ..training.corpus import read_split
from .scoring import Score, Task, build_tasks, decoding_label, score, summarise, warm


# (mode, steps, commit rule[, AR fallback[, check]]); diffusion's draft unchecked under the default rule
# at every T and the `fixed` rule beside it at T=2 and 4; at T=4 with the AR fallback; and the request's
# defaults (steps None): the AR check of the draft (`auto`: at single-line cursors, whose drafts then
# run api.CHECKED_STEPS), alone and the server's way, with AR again when the editor would show nothing
# (at a multi-line cursor, too little: postprocess.Shown.would_show)
MODES = [("diffusion", 1, "content"), ("diffusion", 2, "content"), ("diffusion", 4, "content"),
         ("diffusion", 8, "content"), ("diffusion", 2, "fixed"), ("diffusion", 4, "fixed"),
         ("diffusion", 4, "content", True), ("diffusion", None, "content", False, "auto"),
         ("diffusion", None, "content", True, "auto"), ("ar", None, "content")]


def _fallback(mode: tuple) -> bool:
    """A MODES entry's AR-fallback flag (an entry without one: off)."""
    return bool(mode[3:] and mode[3])


def _check(mode: tuple) -> str | None:
    """A MODES entry's check (an entry without one: the draft unchecked)."""
    return mode[4] if len(mode) > 4 else None


def evaluate(engine: Engine, tasks: list[Task], span_length: int | None, modes=MODES, progress: bool = True) -> dict:
    """Score every task under every mode. span_length None: each request's default, as the server
    sends it (the model's span; a shorter one at a single-line cursor, length.start_span)."""
    scores: dict[tuple, list[Score]] = {}
    for i, task in enumerate(tasks):
        warm(engine, task)
        for entry in modes:
            mode, steps, rule, fallback, check = *entry[:3], _fallback(entry), _check(entry)
            scores.setdefault((mode, steps, rule, fallback, check, task.kind), []).append(
                score(engine, task, fallback, span_length=span_length, steps=steps, mode=mode, rule=rule, check=check))
        if progress and (i + 1) % 20 == 0:
            print(f"\r{i + 1}/{len(tasks)} tasks", end="", file=sys.stderr)
    if progress:
        print(file=sys.stderr)
    results = [{"mode": mode, "steps": steps, "rule": rule, "fallback": fallback, "check": check, "kind": kind,
                "span_length": span_length, **summarise(vals)}
               for (mode, steps, rule, fallback, check, kind), vals in scores.items()]
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
    ap.add_argument("--span", type=int, default=None, help="span length every request names (default: none, as the server)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--eager", action="store_true", help="do not compile the CPU steps (compiling takes about two minutes on 2 cores)")
    ap.add_argument("--dtype", default="auto")
    args = ap.parse_args(argv)
    # every mistake a user can make here is found before a model loads and tasks run for minutes
    if args.single < 0 or args.multi < 0 or args.single + args.multi == 0:
        ap.error(f"--single {args.single} --multi {args.multi}: counts of tasks, 0 or more, not both 0")
    if args.span is not None and not 1 <= args.span <= MAX_SPAN:
        ap.error(f"--span {args.span} is out of range; use 1..{MAX_SPAN}")
    if args.out.suffix == ".png" or args.out.is_dir():
        ap.error(f"--out {args.out} is where the JSON report goes (its plot goes beside it as .png)")
    if problem := unwritable(args.out, make_folders=True):
        ap.error(f"--out {args.out}: {problem}")
    if not (args.data / "held_out.jsonl").is_file():
        ap.error(f"--data {args.data} has no held_out.jsonl (`spanfill data --out {args.data}` writes one)")
    engine = Engine.load(args.model, device=args.device, dtype=args.dtype, compile=False if args.eager else None, wait=True)
    L = args.span or engine.info["span_length"]
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer, L)
    has = engine.info.get("modes", ("diffusion", "ar"))      # public checkpoints: no AR path, so no AR fallback
    modes = [m for m in MODES if m[0] in has and (not (_fallback(m) or _check(m)) or "ar" in has)]
    report = evaluate(engine, tasks, args.span, modes)
    report["tasks"] = {"single": sum(t.kind == "single" for t in tasks), "multi": sum(t.kind == "multi" for t in tasks)}
    report["command"] = "spanfill eval " + " ".join(argv if argv is not None else sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(args.out, lambda path: path.write_text(json.dumps(report, indent=2) + "\n"))
    plot(report, args.out.with_suffix(".png"))
    for r in sorted(report["results"], key=lambda r: (r["kind"], r["mode"], r.get("rule", ""), r.get("fallback", False),
                                                      r.get("check") is not None, r["steps"] or 0)):
        print(f"{r['kind']:<7} {decoding_label(r):<38} EM {r['exact_match']:.1%}  ES {r['edit_similarity']:.3f}  "
              f"shown EM {r['shown_exact_match']:.1%}  ES {r['shown_edit_similarity']:.3f}  "
              f"p50 {r['latency_median_ms']:.1f} ms  p95 {r['latency_p95_ms']:.1f} ms  mean {r['latency_mean_ms']:.1f} ms  passes {r['forward_passes_mean']:.1f}  "
              f"chars {r['shown_chars_mean']:.1f} (reference {r['reference_chars_mean']:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
