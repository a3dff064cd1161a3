"""fp32 against int8 matmuls (engine/core/quantize.py, `dtype` `int8`) in one process: the shipped model
loaded twice, both with their compiled CPU steps, decoding the same held-out single- and multi-line
tasks at T=4 (the span's text, check=None) and in AR mode, the four settings in an order that rotates
task by task (common.alternate), so both see the same machine. Latency, exact match (raw and as the editor shows it), edit similarity
per setting, and each engine's compile time; writes results/int8.json.

    python benchmarks/int8.py --data /work/data
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, load_engine, write  # noqa: E402

from spanfill.engine import build_tasks, read_split, score, summarise  # noqa: E402

SETTINGS = ("fp32", "int8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    args = ap.parse_args(argv)
    engines = {dtype: load_engine(args.model, dtype=dtype) for dtype in SETTINGS}
    L = engines["fp32"].model.cfg.span_length
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engines["fp32"].tokenizer, L)
    modes = (("diffusion", args.steps), ("ar", None))
    settings = [(mode, steps, dtype) for dtype in SETTINGS for mode, steps in modes]
    runs = alternate(list(engines.values()), tasks, settings,
                     lambda task, s: score(engines[s[2]], task, steps=s[1], mode=s[0], check=None))
    rows = []
    for (kind, (mode, _, dtype)), vals in sorted(runs.items()):    # by kind, mode (with its steps), dtype
        rows.append({"kind": kind, "mode": mode, "steps": args.steps if mode == "diffusion" else None, "dtype": dtype,
                     **summarise(vals)})
        r = rows[-1]
        label = f"T={args.steps}" if mode == "diffusion" else "AR"
        print(f"{kind:<7} {label:<4} {dtype:<5} p50 {r['latency_median_ms']:6.1f} ms  p95 {r['latency_p95_ms']:6.1f} ms  "
              f"EM {r['exact_match']:.1%}  shown EM {r['shown_exact_match']:.1%}  ES {r['edit_similarity']:.3f}")
    info = {dtype: engine.info for dtype, engine in engines.items()}
    for dtype, engine_info in info.items():
        if engine_info["compiled"]:
            print(f"{dtype}: compiled in {engine_info['compile_seconds']:.0f} s, fallbacks {engine_info['compiled_fallbacks']}")
    out = write("int8", {"engines": info, "steps": args.steps, "rows": rows,
                         "command": "python benchmarks/int8.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
