"""Line-level infilling: one whole held-out line to write at column 0 of the line that follows it
(`build_tasks`' `line` kind: the cursor has code after it, so it is a single-line cursor). The
server shows whole lines above the cursor's line, with their line break (postprocess.at_line_start);
beside it the single-line policy alone (`first line`: the candidate's first line, no break, which
joins the line below). Diffusion the server's way (its defaults, the AR fallback under each policy's
own would-show) and AR mode, alternating task by task in one process. Per row: exact match and edit
similarity as shown, how often prefix + shown + suffix is the file itself, chars, latency; paired
task by task against the same decoding under `first line`. Writes results/line_start.json.

    python benchmarks/line_start.py --data /work/data
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import alternate, load_engine, paired, task_counts, write  # noqa: E402

from spanfill.engine import CompletionRequest, Cursor, build_tasks, finish, read_split, score_text, summarise  # noqa: E402


def first_line(raw: str, cursor) -> str | None:
    """The single-line policy alone at these cursors: the candidate's first line, finished without its break."""
    return finish(raw.split("\n", 1)[0], cursor, python=True)


def whole_lines(raw: str, cursor) -> str | None:
    """The server's post-processing (whole lines above a column-0 cursor's line)."""
    return finish(raw, cursor, python=True)


POLICIES = {"whole lines": whole_lines, "first line": first_line}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="checkpoint dir (default: the shipped model)")
    ap.add_argument("--data", type=Path, default=Path("data"), help="`spanfill data` output with held_out.jsonl")
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--eager", action="store_true", help="the eager step (default: the compiled one, as served)")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, eager=args.eager)
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), 0, 0, engine.tokenizer,
                        engine.model.cfg.span_length, n_line=args.tasks)
    settings = [(mode, policy) for mode in ("diffusion", "ar") for policy in POLICIES]
    whole_file = {setting: [] for setting in settings}   # prefix + shown + suffix is the file

    def decode(task, setting):
        mode, policy = setting
        show, cursor = POLICIES[policy], Cursor(task.prefix, task.suffix)
        would_show = (lambda raw: show(raw, cursor) is not None) if mode == "diffusion" else None
        t0 = time.perf_counter()
        result = engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, mode=mode, would_show=would_show))
        ms = (time.perf_counter() - t0) * 1e3
        shown = show(result.texts[0], cursor)
        whole_file[setting].append((shown or "") == task.middle)
        return score_text(task, result.texts[0], ms, result.forward_passes, lambda _raw, _cursor: shown)

    runs = alternate([engine], tasks, settings, decode)
    rows = []
    for mode, policy in settings:
        vals = runs[("line", (mode, policy))]
        row = {"mode": mode, "policy": policy, **summarise(vals),
               "file_exact": statistics.fmean(whole_file[(mode, policy)])}
        if policy != "first line":
            row["vs_first_line"] = paired(vals, runs[("line", (mode, "first line"))])
        rows.append(row)
        print(f"{mode:<9} {policy:<11} shown EM {row['shown_exact_match']:6.1%}  file {row['file_exact']:6.1%}  "
              f"ES {row['shown_edit_similarity']:.3f}  chars {row['shown_chars_mean']:5.1f} "
              f"(reference {row['reference_chars_mean']:5.1f})  p50 {row['latency_median_ms']:6.1f} ms")
    out = write("line_start", {"engine": engine.info, "tasks": task_counts(tasks), "rows": rows,
                               "command": "python benchmarks/line_start.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
