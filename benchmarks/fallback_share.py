"""When a multi-line diffusion candidate is worth showing (postprocess.MIN_SHOWN_SHARE): held-out
multi-line tasks of one or more `spanfill data` splits, completed as the server asks (the default
request, the AR fallback) where the engine falls back to AR unless the editor would show at least a
given share of what diffusion wrote, and by AR decoding of the same weights, alternating task by task
in one process. Per share: exact match, edit similarity and chars as shown, how many requests fell
back, latency, and the paired edit-similarity difference against the first share and against AR, per
split and over all; writes results/fallback_share.json. Share 0 falls back only where nothing is shown.

    python benchmarks/fallback_share.py --data /work/data /work/data_fresh /work/data3 /work/data4 --multi 600 --shares 0.5 0.9 1.0
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_multiline_args, compare_multiline, load_engine  # noqa: E402

from spanfill.engine import CompletionRequest, Cursor, Shown, score_text  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_multiline_args(ap, multi=300)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.5],
                    help="the first is the baseline of the paired differences")
    ap.add_argument("--eager", action="store_true", help="the eager steps (the same text, slower)")
    args = ap.parse_args(argv)
    if any(not 0 <= s <= 1 for s in args.shares):
        ap.error("shares lie between 0 and 1")
    engine = load_engine(args.model, eager=args.eager)
    fell_back: dict[float, int] = dict.fromkeys(args.shares, 0)

    def decode(task, share):
        shown = Shown(Cursor(task.prefix, task.suffix), python=True, min_share=share)   # held-out tasks are Python
        t0 = time.perf_counter()         # the whole call, as `score` times AR's
        result = engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, would_show=shown.would_show))
        ms = (time.perf_counter() - t0) * 1e3
        fell_back[share] += result.fell_back
        return score_text(task, result.texts[0], ms, result.forward_passes,
                          lambda raw, _cursor: shown.text(raw))

    status = compare_multiline(engine, args, argv, "fallback_share", "share", "diffusion", decode, fell_back=fell_back)
    print("fell back to AR: " + ", ".join(f"share {s}: {n}" for s, n in fell_back.items()))
    return status


if __name__ == "__main__":
    sys.exit(main())
