"""Checkpoints side by side: the same held-out single- and multi-line tasks completed by two or more
model directories as the server asks (the request's defaults, so the AR check at a single-line
cursor, and the AR fallback), every model on every task in one process (the order rotates with the
task). Per model and kind: exact match and edit similarity as the editor shows them, chars shown
beside the reference's, latency; and, paired task by task against the first model, the exact
matches won and lost, a two-sided sign test on them, and the mean shown edit-similarity difference
with its standard error. A new shipped checkpoint (engine/tools/ship.py) is one this says is better.
Writes results/checkpoints.json.

    python benchmarks/checkpoints.py --data /work/data --models shipped /work/runs/v4 --single 1000 --multi 200 --eager
    python benchmarks/checkpoints.py --data /work/data --models git:6e35145 shipped --single 2000 --multi 200 --eager

A model named `git:REV` is the default model as the repository held it at revision REV (its files read
with `git show` into a temporary directory), so a shipped checkpoint stays comparable with the one it
replaced.

Choosing among several candidates on one set of tasks favours the luckiest, so the winner is checked
again on tasks it was not chosen on: `--fresh-after S M` keeps only the tasks that a build of S + --single
single-line and M + --multi multi-line tasks makes beyond a build of S and M (the tasks of a run with
`--single S --multi M`); a few fewer than asked where the two builds cut a file alike.

    python benchmarks/checkpoints.py --data /work/data --models git:aae3464 shipped --single 2000 --multi 200 --eager --fresh-after 2000 200
"""
from __future__ import annotations

import argparse
import atexit
import math
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, fresh_tasks, load_engine, paired, task_counts, write  # noqa: E402

from spanfill.engine import build_tasks, read_split, score, summarise  # noqa: E402

SHIPPED = "shipped"     # --models entry naming the model the package ships
GIT = "git:"            # --models entry prefix: the shipped model at a revision of this repository
REPO = Path(__file__).resolve().parents[1]
MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")


def model_dir(name: str) -> str | None:
    """The directory --models' `name` loads from: None for the shipped model, `git:REV`'s files written
    into a temporary directory, else the name itself."""
    if name == SHIPPED:
        return None
    if not name.startswith(GIT):
        return name
    rev, directory = name[len(GIT):], Path(tempfile.mkdtemp(prefix="spanfill-model-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    for file in MODEL_FILES:
        shown = subprocess.run(["git", "show", f"{rev}:engine/default_model/{file}"], cwd=REPO, capture_output=True)
        if shown.returncode != 0:
            raise SystemExit(f"--models {name}: git cannot show engine/default_model/{file} at {rev!r} in {REPO} "
                             f"({shown.stderr.decode().strip()}); name a revision of this repository")
        (directory / file).write_bytes(shown.stdout)
    return str(directory)


def sign_test(won: int, lost: int) -> float:
    """Two-sided p of `won` against `lost` under a fair coin (ties, tasks both or neither got, left out)."""
    n, k = won + lost, min(won, lost)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    ap.add_argument("--models", nargs="+", required=True,
                    help=f"two or more checkpoint dirs ('{SHIPPED}': the shipped model; '{GIT}REV': the shipped "
                         f"model at revision REV); the first is the baseline")
    ap.add_argument("--eager", action="store_true", help="the eager steps (the compiled ones by default)")
    ap.add_argument("--fresh-after", nargs=2, type=int, default=None, metavar=("S", "M"),
                    help="only tasks beyond those of --single S --multi M (to confirm a choice made on those)")
    args = ap.parse_args(argv)
    if len(args.models) < 2:
        ap.error("--models needs at least two checkpoints")
    engines = {}
    for name in args.models:
        engine = load_engine(model_dir(name), eager=args.eager)
        if engine.compiled is not None:
            engine.compiled.strict = False    # the check's pass over the draft runs eagerly by design
        engines[name] = engine
    first = engines[args.models[0]]
    if any(e.tokenizer.vocab_size != first.tokenizer.vocab_size for e in engines.values()):
        sys.stderr.write("note: the models' tokenizers differ; tasks are cut by the first model's\n")
    files, L = read_split(args.data / "held_out.jsonl"), first.model.cfg.span_length
    if args.fresh_after is None:
        tasks = build_tasks(files, args.single, args.multi, first.tokenizer, L)
    else:
        tasks = fresh_tasks(files, args.single, args.multi, tuple(args.fresh_after), first.tokenizer, L)
    names = list(engines)
    runs = alternate(list(engines.values()), tasks, names,
                     lambda task, name: score(engines[name], task, fallback=True))
    rows = []
    for kind in ("single", "multi"):
        for name in names:
            if (kind, name) not in runs:
                continue
            row = {"kind": kind, "model": name, "info": engines[name].info, **summarise(runs[(kind, name)])}
            if name != names[0]:
                vs = paired(runs[(kind, name)], runs[(kind, names[0])])
                row["vs_first"] = {**vs, "sign_test_p": sign_test(vs["won"], vs["lost"])}
            rows.append(row)
            vs = row.get("vs_first")
            print(f"{kind:<7} {name:<28} shown EM {row['shown_exact_match']:6.1%}  ES {row['shown_edit_similarity']:.3f}  "
                  f"chars {row['shown_chars_mean']:5.1f} ({row['reference_chars_mean']:5.1f})  "
                  f"p50 {row['latency_median_ms']:6.1f} ms"
                  + (f"  vs {names[0]}: EM +{vs['won']}/-{vs['lost']} (p {vs['sign_test_p']:.3f}) "
                     f"ES {vs['es_diff']:+.4f}±{vs['es_diff_se']:.4f}" if vs else ""))
    out = write("checkpoints", {"models": names, "eager": args.eager, "tasks": task_counts(tasks), "rows": rows,
                                "command": "python benchmarks/checkpoints.py "
                                + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
