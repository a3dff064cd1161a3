"""A judging set of code no spanfill model has trained on (engine/training/fresh.py): the source of
the pinned packages of engine/training/fresh_packages.txt, less every file that is, or is a version
of, a file of the named corpus builds. Checkpoints are judged on it beside the corpus's own held-out
split (`benchmarks/checkpoints.py --data OUT`).

    python benchmarks/fresh_set.py --out /work/data_fresh --corpus /work/data /work/data2
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spanfill.engine import FRESH_LIST, build_fresh_set


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, nargs="+", required=True,
                    help="`spanfill data` outputs a model trained on: their files and versions are left out")
    ap.add_argument("--list", type=Path, default=FRESH_LIST)
    args = ap.parse_args(argv)
    stats = build_fresh_set(args.out, args.corpus, args.list,
                            "python benchmarks/fresh_set.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    print(f"{stats['kept']} files kept of {stats['read']} ({stats['copies']} copies and {stats['versions']} versions "
          f"of the corpus's {stats['corpus_files']} files left out): {args.out / 'held_out.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
