"""Batch completion for evaluations: one JSON object per line in, the same object plus
"completion" (text inserted between prefix and suffix) and "latency_ms" out.

    spanfill batch tasks.jsonl completions.jsonl [--steps 4] [--span 32] [--mode diffusion|ar] [--model DIR]

A line that is not valid JSON or lacks "prefix"/"suffix" stops the run with its line number;
nothing is written for it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..api import CompletionRequest
from ..engine import Engine


class BatchInputError(ValueError):
    pass


def read_tasks(path: Path) -> list[dict]:
    tasks = []
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                task = json.loads(line)
            except json.JSONDecodeError as err:
                raise BatchInputError(f"{path}:{number}: not valid JSON ({err.msg})") from err
            if not isinstance(task, dict) or not isinstance(task.get("prefix"), str) or not isinstance(task.get("suffix", ""), str):
                raise BatchInputError(f"{path}:{number}: expected an object with string \"prefix\" and \"suffix\"")
            tasks.append(task)
    return tasks


def run(engine: Engine, tasks: list[dict], steps: int | None, span: int | None, mode: str):
    for task in tasks:
        t0 = time.perf_counter()
        result = engine.complete(CompletionRequest(prefix=task["prefix"], suffix=task.get("suffix", ""),
                                                   steps=steps, span_length=span, mode=mode))
        yield {**task, "completion": result.texts[0], "latency_ms": round((time.perf_counter() - t0) * 1e3, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill batch", description="complete every line of a JSONL file")
    ap.add_argument("input", type=Path)
    ap.add_argument("output", type=Path)
    ap.add_argument("--steps", type=int, default=None, help="denoising steps T (default: the model's)")
    ap.add_argument("--span", type=int, default=None, help="span length L (default: the model's)")
    ap.add_argument("--mode", choices=("diffusion", "ar"), default="diffusion")
    ap.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--eager", action="store_true", help="do not compile the CPU steps (compiling takes about two minutes on 2 cores)")
    args = ap.parse_args(argv)
    try:
        tasks = read_tasks(args.input)
        engine = Engine.load(args.model, device=args.device, compile=False if args.eager else None, wait=True)
        with args.output.open("w", encoding="utf-8") as out:
            for row in run(engine, tasks, args.steps, args.span, args.mode):
                out.write(json.dumps(row) + "\n")
    except (OSError, ValueError) as err:
        print(f"spanfill batch: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(tasks)} completions to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
