"""How much of the context budget the windows fill: held-out single- and multi-line tasks completed as
the server asks (its defaults: the AR check at a single-line cursor, the AR fallback, the Python gate
with the document above the window), with the prefix and suffix windows cut on line boundaries to
shares of the engine's budget, as the server's context builder cuts them (`cut_prefix`/`cut_suffix`).
Shares alternate task by task in one process. Per share: exact match and edit similarity as shown and
the context's token count, paired task by task against the last share (quality only: each task's
whole context is cached first, as typing up to the cursor would, so a smaller window's latency
includes a prefill). The server's
windows hold between server/context.py's LOW and 100% of the budget and a recut aims for its TARGET:
this is what those shares cost in completions. Writes results/windows.json.

    python benchmarks/windows.py --data /work/data --single 1000 --multi 200 --eager --shares 0.5 0.75 0.85 0.95 1
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, load_engine, paired, task_counts, write  # noqa: E402

from spanfill.engine import (CompletionRequest, Cursor, Shown, build_tasks, cut_prefix, cut_suffix,  # noqa: E402
                             read_split, score_text, summarise)
from spanfill.server.context import LOW, TARGET  # noqa: E402


def windowed(engine, task, share: float):
    """(score, context tokens) of `task` completed with windows cut to `share` of the engine's budget."""
    tok, budget = engine.tokenizer, engine.budget
    prefix = cut_prefix(tok, task.prefix, max(1, int(budget.prefix_tokens * share)))
    suffix = cut_suffix(tok, task.suffix, max(1, int(budget.suffix_tokens * share)))
    shown = Shown(Cursor(prefix, suffix, task.prefix[:len(task.prefix) - len(prefix)]), python=True)
    t0 = time.perf_counter()
    result = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, would_show=shown.would_show))
    ms = (time.perf_counter() - t0) * 1e3
    return score_text(task, result.texts[0], ms, result.forward_passes, lambda raw, _cursor: shown.text(raw)), \
        result.context_tokens


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    ap.add_argument("--shares", nargs="+", type=float, default=[0.75, 0.95, 1.0],
                    help="shares of the budget the windows are cut to; the last is the one the others pair with")
    ap.add_argument("--eager", action="store_true", help="the eager steps (the compiled ones by default)")
    args = ap.parse_args(argv)
    if any(not 0 < s <= 1 for s in args.shares) or len(set(args.shares)) < 2:
        ap.error("--shares: two or more different shares in (0, 1]")
    engine = load_engine(args.model, eager=args.eager)
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer,
                        engine.model.cfg.span_length)
    runs = alternate([engine], tasks, args.shares, lambda task, share: windowed(engine, task, share))
    base = args.shares[-1]
    rows = []
    for (kind, share), vals in sorted(runs.items()):
        scores = [s for s, _ in vals]
        row = {"kind": kind, "share": share, "context_tokens_mean": sum(n for _, n in vals) / len(vals),
               **summarise(scores)}
        if share != base:
            row["against_last"] = paired([s for s, _ in runs[kind, base]], scores)
        rows.append(row)
        vs = row.get("against_last")
        print(f"{kind:<7} share {share:<5} context {row['context_tokens_mean']:6.1f} tokens  shown EM "
              f"{row['shown_exact_match']:.1%}  ES {row['shown_edit_similarity']:.3f}"
              + (f"  share {base} won {vs['won']} lost {vs['lost']} ES {vs['es_diff']:+.4f} ± {vs['es_diff_se']:.4f}" if vs else ""))
    out = write("windows", {"engine": engine.info, "budget": {"prefix_tokens": engine.budget.prefix_tokens,
                                                              "suffix_tokens": engine.budget.suffix_tokens},
                            "server_windows": {"low": LOW, "target": TARGET}, "eager": args.eager, "shares": args.shares, "tasks": task_counts(tasks), "rows": rows,
                            "command": "python benchmarks/windows.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
