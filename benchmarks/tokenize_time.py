"""Tokenize time per keystroke while typing into a large held-out file: the server's context windows
plus the engine's context ids (`Timings.tokenize_ms`), in two settings alternating keystroke by
keystroke in one process (which goes first alternates too):

* pieces: window ids from the tokenizer's line-piece memo (`Tokenizer.encode_cached`), sent with
  the request, so a keystroke encodes about one line and the engine encodes no window;
* whole: every window encoded whole by the server to check its budget, and again by the engine.

Both must give the engine the same context; the run stops at the first keystroke where they do not.
The engine's stage includes token healing (the same work in both). Writes results/tokenize_time.json.

    python benchmarks/tokenize_time.py --data /work/data       # the held-out file nearest 2,000 lines
    python benchmarks/tokenize_time.py --data /work/data --context-tokens 1536   # larger windows
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import load_engine, summary, write  # noqa: E402

from spanfill.engine import Budget, CompletionRequest, Tokenizer, to_lf  # noqa: E402
from spanfill.server.context import ContextBuilder  # noqa: E402
from spanfill.server.documents import Document  # noqa: E402

SETTINGS = ("pieces", "whole")


def nearest_file(held_out: Path, lines: int) -> tuple[str, str]:
    best = None
    with held_out.open(encoding="utf-8") as fh:
        for row in map(json.loads, fh):
            gap = abs(row["text"].count("\n") - lines)
            if best is None or gap < best[0]:
                best = gap, row["path"], row["text"]
    return best[1], best[2]


def keystrokes(text: str, places: int):
    """(document text, cursor) while retyping, character by character, one line of code at each of
    `places` points spread over the middle half of the file."""
    lines = text.splitlines(keepends=True)
    for p in range(places):
        k = len(lines) // 4 + p * len(lines) // (2 * places)
        while not 8 <= len(lines[k].strip()) <= 80:
            k += 1
        start, line = sum(map(len, lines[:k])), lines[k].rstrip("\r\n")
        rest = text[start + len(line):]
        for i in range(len(line) + 1):
            yield text[:start] + line[:i] + rest, start + i


def keystroke(engine, builders: dict, doc: Document, cursor: int, order) -> dict:
    """setting -> (window ms, engine tokenize ms, what the engine was given) for one keystroke."""
    ctxs, window_ms = {}, {}
    for setting in order:
        t0 = time.perf_counter()
        ctxs[setting] = builders[setting].build(doc, cursor, [])
        window_ms[setting] = (time.perf_counter() - t0) * 1e3
    requests = {setting: CompletionRequest(
        prefix=to_lf(ctx.prefix), suffix=to_lf(ctx.suffix), span_length=8, steps=1, cut=False,
        **(dict(prefix_ids=ctx.prefix_ids, suffix_ids=ctx.suffix_ids) if setting == "pieces" else {}))
        for setting, ctx in ctxs.items()}
    out = {}
    for setting in order:
        ctx, result = ctxs[setting], engine.complete(requests[setting])
        given = {"prefix": ctx.prefix, "suffix": ctx.suffix, "prefix_ids": ctx.prefix_ids, "suffix_ids": ctx.suffix_ids,
                 "context_tokens": result.context_tokens, "texts": result.texts}
        out[setting] = window_ms[setting], result.timings.tokenize_ms, given
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("data"), help="`spanfill data` output with held_out.jsonl")
    ap.add_argument("--model", default=None, help="checkpoint dir (default: the shipped model)")
    ap.add_argument("--lines", type=int, default=2000, help="type into the held-out file nearest this many lines")
    ap.add_argument("--places", type=int, default=5, help="lines retyped, spread over the file's middle")
    ap.add_argument("--context-tokens", type=int, default=None,
                    help="the windows' budget, as the maxContextTokens setting (default: the model's)")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, eager=True)
    path, text = nearest_file(args.data / "held_out.jsonl", args.lines)
    whole_tok = Tokenizer(engine.tokenizer.hf)
    whole_tok.piece_ids = None                    # encode_cached encodes whole
    budget = Budget.scaled(args.context_tokens) if args.context_tokens else engine.budget
    builders = {name: ContextBuilder(tok, budget.prefix_tokens, budget.suffix_tokens, budget.snippet_tokens, 0)
                for name, tok in (("pieces", engine.tokenizer), ("whole", whole_tok))}
    times: dict[str, dict[str, list[float]]] = {s: {"window": [], "tokenize": [], "total": []} for s in SETTINGS}
    prefix_tokens = []
    for n, (typed, cursor) in enumerate(keystrokes(text, args.places)):
        doc = Document("file:///held_out/" + path, "python", n, typed)
        doc.line_starts                           # the line index is built per edit whatever the windows cost
        order = SETTINGS if n % 2 else SETTINGS[::-1]
        measured = keystroke(engine, builders, doc, cursor, order)
        for setting, (window_ms, tokenize_ms, _) in measured.items():
            for stage, ms in (("window", window_ms), ("tokenize", tokenize_ms), ("total", window_ms + tokenize_ms)):
                times[setting][stage].append(ms)
        if measured["pieces"][2] != measured["whole"][2]:
            sys.stderr.write(f"keystroke {n}: the two settings gave the engine different contexts\n")
            return 1
        prefix_tokens.append(len(measured["pieces"][2]["prefix_ids"]))
    rows = [{"setting": s, **{stage: summary(ms) for stage, ms in times[s].items()}} for s in SETTINGS]
    for r in rows:
        print(f"{r['setting']:<7} " + "  ".join(f"{stage} p50 {r[stage]['median_ms']:.3f} ms p95 {r[stage]['p95_ms']:.3f} ms"
                                             for stage in ("window", "tokenize", "total")))
    ratio = rows[1]["total"]["median_ms"] / rows[0]["total"]["median_ms"]
    print(f"{len(times['pieces']['total'])} keystrokes into {path} ({text.count(chr(10))} lines); "
          f"prefix window {statistics.median(prefix_tokens):.0f} tokens (median); whole / pieces: {ratio:.1f}x")
    out = write("tokenize_time", {"engine": engine.info, "file": path, "lines": text.count("\n"),
                             "keystrokes": len(prefix_tokens), "prefix_tokens_median": statistics.median(prefix_tokens),
                             "budget": vars(budget), "rows": rows, "whole_over_pieces": round(ratio, 2),
                             "command": "python benchmarks/tokenize_time.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
