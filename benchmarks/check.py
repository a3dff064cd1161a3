"""The AR check of diffusion's draft (`CompletionRequest.check`, engine/decoding/check.py) at several
acceptances and as the request's default (`auto`), beside diffusion's draft unchecked and AR decoding
of the same weights: held-out single- and multi-line tasks, every setting on every task in one process
(the order rotates with the task), each as the server asks (the AR fallback on). Per setting and kind:
exact match and edit similarity as the editor shows them, chars shown beside the reference's, latency,
forward passes, how many of the middle's tokens are the draft's; and, paired task by task against the
unchecked draft and against AR, the tasks won and lost on exact match and the mean edit-similarity
difference with its standard error. Writes results/check.json.

    python benchmarks/check.py --data /work/data --single 1000 --multi 200
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, load_engine, paired, task_counts, write  # noqa: E402

from spanfill.engine import CompletionRequest, Cursor, Shown, build_tasks, read_split, score_text, summarise  # noqa: E402

# "auto": the request's defaults (at a single-line cursor a draft of api.CHECKED_STEPS, its tokens held to
# DEFAULT_CHECK and its end to DEFAULT_END_CHECK; unchecked at a multi-line one); "none": the draft as it
# is; 1: AR's own choices only; "0.03:2": a draft of 2 steps, where the others run --steps
CHECKS = ("auto", "none", "0.03", "0.03:2", "0.1", "0.3", "1")


def parse(setting: str, steps: int) -> tuple[float | str | None, int | None, int | None]:
    """(acceptance, "auto" or None; the draft's steps, None for the request's default; its span, None for
    the request's default) of a CHECKS-style entry ACCEPTANCE[:T[:L]]: "0.03:2" drafts in 2 steps,
    "0.03:2:8" on a span of 8 positions."""
    check, own_steps, span = (setting.split(":") + ["", ""])[:3]
    acceptance = None if check in ("ar", "none") else check if check == "auto" else float(check)
    return (acceptance, int(own_steps) if own_steps else None if check == "auto" else steps,
            int(span) if span else None)


def run(engine, task, steps: int, setting: str):
    """(score, draft tokens kept) of one task under one setting ("ar" or a CHECKS entry)."""
    shown = Shown(Cursor(task.prefix, task.suffix), python=True)   # held-out tasks are Python files
    mode = "ar" if setting == "ar" else "diffusion"
    check, steps, span = parse(setting, steps)
    req = CompletionRequest(prefix=task.prefix, suffix=task.suffix, mode=mode, steps=steps, check=check,
                            span_length=span, would_show=shown.would_show)
    t0 = time.perf_counter()
    result = engine.complete(req)
    ms = (time.perf_counter() - t0) * 1e3
    return (score_text(task, result.texts[0], ms, result.forward_passes, lambda raw, _cursor: shown.text(raw)),
            (result.kept_tokens or [0])[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    ap.add_argument("--checks", nargs="+", default=list(CHECKS),
                    help=f"default: {' '.join(CHECKS)}; ACCEPTANCE:T drafts in T steps instead of --steps, "
                         "ACCEPTANCE:T:L on a span of L positions instead of the request's default")
    ap.add_argument("--eager", action="store_true", help="the eager steps (the compiled ones by default)")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, eager=args.eager)
    if engine.compiled is not None:
        engine.compiled.strict = False    # the check's pass over the draft runs eagerly by design
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer,
                        engine.model.cfg.span_length)
    settings = list(args.checks) + ["ar"]
    runs = alternate([engine], tasks, settings, lambda task, setting: run(engine, task, args.steps, setting))
    rows = []
    for (kind, setting), vals in sorted(runs.items()):
        scores = [s for s, _ in vals]
        acceptance, steps, span = parse(setting, args.steps)
        row = {"kind": kind, "setting": setting, "steps": None if setting == "ar" else steps, "span_length": span,
               **summarise(scores),
               "kept_tokens_mean": statistics.fmean(k for _, k in vals)}
        if setting != "ar" and acceptance is not None and "none" in settings:
            row["vs_unchecked"] = paired(scores, [s for s, _ in runs[(kind, "none")]])
        if setting != "ar":
            row["vs_ar"] = paired(scores, [s for s, _ in runs[(kind, "ar")]])
        rows.append(row)
    for r in rows:
        acceptance = parse(r["setting"], args.steps)[0]
        name = ("AR" if r["setting"] == "ar" else "draft unchecked" if acceptance is None
                else "auto (default)" if acceptance == "auto" else f"check {acceptance:g}")
        name += f" T={r['steps']}" if ":" in r["setting"] else ""
        name += f" L={r['span_length']}" if r["span_length"] else ""
        vs = "".join(f"  vs {who}: EM +{p['won']}/-{p['lost']} ES {p['es_diff']:+.4f}±{p['es_diff_se']:.4f}"
                     for who, p in (("draft", r.get("vs_unchecked")), ("AR", r.get("vs_ar"))) if p)
        print(f"{r['kind']:<7} {name:<16} shown EM {r['shown_exact_match']:6.1%}  ES {r['shown_edit_similarity']:.3f}  "
              f"chars {r['shown_chars_mean']:5.1f} ({r['reference_chars_mean']:5.1f})  p50 {r['latency_median_ms']:6.1f} ms  "
              f"passes {r['forward_passes_mean']:5.2f}  kept {r['kept_tokens_mean']:4.1f}{vs}")
    out = write("check", {"engine": engine.info, "steps": args.steps, "fallback": True,
                          "tasks": task_counts(tasks), "rows": rows,
                          "command": "python benchmarks/check.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
