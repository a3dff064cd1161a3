"""Where the length head ends a multi-line span (`Engine.head_quantile`, decoding/length.py
HEAD_QUANTILE): held-out multi-line tasks of one or more `spanfill data` splits, completed as the
server asks (the default request at T steps, the AR fallback) with the head's end at each quantile,
and by AR decoding of the same weights, alternating task by task in one process. Per quantile: exact
match, edit similarity and chars as shown, latency, and the paired edit-similarity difference against
the first quantile and against AR (mean and standard error), per split and over all; writes
results/head_quantile.json.

    python benchmarks/head_quantile.py --data /work/data /work/data_fresh --multi 500 --quantiles 0.3 0.4 0.5 --eager

A choice made on those tasks is confirmed on tasks beyond them (`--after M`: each split's multi-line
tasks that a build of M + --multi makes beyond a build of M):

    python benchmarks/head_quantile.py --data /work/data_fresh /work/data4 --after 1000 --multi 600 --quantiles 0.4 0.45 0.5 --eager
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_multiline_args, compare_multiline, load_engine  # noqa: E402

from spanfill.engine import score  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_multiline_args(ap, multi=500)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--quantiles", type=float, nargs="+", default=[0.3, 0.4, 0.5],
                    help="the first is the baseline of the paired differences")
    ap.add_argument("--eager", action="store_true", help="the eager step (the quantile is read before the steps, so "
                    "quality is the compiled step's too)")
    args = ap.parse_args(argv)
    if any(not 0 < q < 1 for q in args.quantiles):
        ap.error("quantiles lie between 0 and 1")
    engine = load_engine(args.model, eager=args.eager)
    if engine.model.length_head is None:   # cpu.sh runs every benchmark on whatever MODEL names
        print(f"{engine.name} has no length head: no quantile to compare, nothing written", file=sys.stderr)
        return 0

    def decode(task, q):
        engine.head_quantile = q
        return score(engine, task, steps=args.steps, fallback=True)

    return compare_multiline(engine, args, argv, "head_quantile", "quantile", "head", decode, steps=args.steps)


if __name__ == "__main__":
    sys.exit(main())
