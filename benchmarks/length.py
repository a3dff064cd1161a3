"""Length strategies side by side (`CompletionRequest.length`, decoding/length.py): held-out single-
and multi-line tasks decoded at T steps by each strategy, and by AR decoding of the same weights as
the baseline, alternating task by task in one process (the order rotates with the task), so every
strategy sees the same machine. Diffusion's draft is scored unchecked (check=None): the length is the
strategy's own, not AR's (benchmarks/check.py measures the check). Per strategy and kind: exact match and edit similarity as the editor
shows them, chars shown beside the reference's, latency; writes results/length.json.

    python benchmarks/length.py --data /work/data --eager

The compiled CPU step runs only the default strategy, so the strategies are compared eagerly
(--eager); without it the default's latency is the compiled one's and the others fall back to eager.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, load_engine, task_counts, write  # noqa: E402

from spanfill.engine import DEFAULT_LENGTH, LENGTHS, build_tasks, read_split, score, summarise  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    ap.add_argument("--lengths", nargs="+", default=None, choices=LENGTHS,
                    help="default: every strategy the model has (`head` needs a length head)")
    ap.add_argument("--no-ar", action="store_true", help="leave out the AR baseline")
    ap.add_argument("--eager", action="store_true", help="every strategy on the eager step (a fair latency comparison)")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, eager=args.eager)
    if engine.compiled is not None:
        engine.compiled.strict = False    # the non-default strategies run eagerly by design
    L = engine.model.cfg.span_length
    if args.lengths is None:
        # `head` needs a length head; without one `auto` is `pad`
        args.lengths = [name for name in LENGTHS if name not in ("head", "auto") or engine.model.length_head is not None]
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer, L)
    settings = [("diffusion", length) for length in args.lengths] + ([] if args.no_ar else [("ar", DEFAULT_LENGTH)])
    runs = alternate([engine], tasks, settings, lambda task, setting: score(
        engine, task, steps=args.steps, mode=setting[0], length=setting[1], check=None))
    rows = [{"kind": kind, "mode": mode, "length": length if mode == "diffusion" else None,
             "steps": args.steps if mode == "diffusion" else None, **summarise(vals)}
            for (kind, (mode, length)), vals in sorted(runs.items())]
    for r in rows:
        name = r["length"] if r["mode"] == "diffusion" else "AR"
        print(f"{r['kind']:<7} {name:<18} shown EM {r['shown_exact_match']:6.1%}  ES {r['shown_edit_similarity']:.3f}  "
              f"chars {r['shown_chars_mean']:5.1f} (reference {r['reference_chars_mean']:5.1f})  "
              f"p50 {r['latency_median_ms']:6.1f} ms  p95 {r['latency_p95_ms']:6.1f} ms  passes {r['forward_passes_mean']:.2f}")
    out = write("length", {"engine": engine.info, "steps": args.steps, "default_length": DEFAULT_LENGTH,
                           "tasks": task_counts(tasks), "rows": rows,
                           "command": "python benchmarks/length.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
