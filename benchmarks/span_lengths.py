"""The lengths a span is cut down to (`Engine.shrink_to`, decoding/length.py's SHRINK_TO), compared
on held-out multi-line tasks as the server asks (T=4, the length head's end, AR fallback) with AR of
the same weights, task by task in one process: each set of lengths is a subset of the one engine's,
whose compiled steps hold a graph for every length of their union. The latency is the compiled
step's (a set's length not compiled would fail in strict mode), the rest as head_quantile.py reports;
writes results/span_lengths.json.

    python benchmarks/span_lengths.py --data /work/data /work/data_fresh --multi 300 --cuts 16,8 24,16,8
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_multiline_args, compare_multiline, load_engine  # noqa: E402

from spanfill.engine import score  # noqa: E402


def lengths(text: str) -> tuple[int, ...]:
    """"24,16,8" -> (24, 16, 8); "none" -> () (the whole span at every step)."""
    if text == "none":
        return ()
    try:
        out = tuple(int(n) for n in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated span lengths (or none)") from None
    if any(n < 1 for n in out):
        raise argparse.ArgumentTypeError(f"{text!r}: span lengths are positive")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_multiline_args(ap, multi=300)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--cuts", type=lengths, nargs="+", default=[(16, 8), (24, 16, 8)],
                    help="sets of lengths, each comma-separated (none: no cut); the first is the baseline")
    ap.add_argument("--eager", action="store_true", help="the eager step: quality only (latency not the server's)")
    args = ap.parse_args(argv)
    union = tuple(sorted({n for cut in args.cuts for n in cut}, reverse=True))

    def cut_to_union(engine):
        L = engine.model.cfg.span_length
        if union and union[0] >= L:   # shrink_lengths would drop it, and the row would be mislabelled
            ap.error(f"--cuts: {union[0]} is not shorter than the model's span of {L}")
        engine.shrink_to = union
    try:
        engine = load_engine(args.model, eager=args.eager, before_compile=cut_to_union)
    except ValueError as err:   # more lengths than the compiled steps can hold
        ap.error(str(err))

    def decode(task, cut):
        engine.shrink_to = cut
        return score(engine, task, steps=args.steps, fallback=True)

    return compare_multiline(engine, args, argv, "span_lengths", "cut", "diffusion", decode, steps=args.steps,
                             union=list(union))


if __name__ == "__main__":
    sys.exit(main())
