"""The span's length, in one process: held-out single- and multi-line tasks decoded at T=4 with the
shipped model's compiled steps under three settings that alternate task by task (the order rotates
too), so all see the same machine:

* `whole`: the model's span (L=32) at every step;
* `cut`: the same span, cut to length.SHRINK_TO's lengths once its tail is committed pads
  (`CompletionRequest.shrink_span`);
* `default`: what a request that names no span length runs: at a single-line cursor it starts on
  length.SINGLE_LINE_SPAN positions (`start_span`), then is cut as under `cut`.

Latency, exact match and edit similarity (raw and as shown), chars shown and forward passes per
setting, of diffusion's draft unchecked (check=None: the AR check is benchmarks/check.py's); writes
results/span_cut.json.

    python benchmarks/span_cut.py --data /work/data
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, load_engine, write  # noqa: E402

from spanfill.engine import build_tasks, read_split, score, shrink_lengths, start_span, summarise  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    args = ap.parse_args(argv)
    engine = load_engine(args.model)
    L = engine.model.cfg.span_length
    if not shrink_lengths(L, engine.shrink_to):
        print(f"span length {L} has nothing shorter to cut to")
        return 1
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer, L)
    settings = {"whole": dict(span_length=L, shrink_span=False), "cut": dict(span_length=L), "default": {}}
    runs = alternate([engine], tasks, list(settings),
                     lambda task, name: score(engine, task, steps=args.steps, check=None, **settings[name]))
    rows = [{"kind": kind, "setting": setting, **summarise(vals)} for (kind, setting), vals in sorted(runs.items())]
    for r in rows:
        print(f"{r['kind']:<7} {r['setting']:<8} p50 {r['latency_median_ms']:6.1f} ms  p95 {r['latency_p95_ms']:6.1f} ms  "
              f"shown EM {r['shown_exact_match']:.1%}  ES {r['shown_edit_similarity']:.3f}  "
              f"chars {r['shown_chars_mean']:.1f} (reference {r['reference_chars_mean']:.1f})  passes {r['forward_passes_mean']:.2f}")
    info = engine.info
    print(f"compiled fallbacks: {info['compiled_fallbacks']}")
    out = write("span_cut", {"engine": info, "steps": args.steps, "cut_to": list(shrink_lengths(L, engine.shrink_to)),
                             "single_line_span": start_span(L, "x = f(", ")\n"), "rows": rows,
                             "command": "python benchmarks/span_cut.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
