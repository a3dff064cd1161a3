"""Batch completion for evaluations: one JSON object per line in, the same object plus
"completion" (the text to insert between prefix and suffix), "raw" and "latency_ms" out.

    spanfill batch tasks.jsonl completions.jsonl [--steps 4] [--span 32] [--mode diffusion|ar] [--model DIR] [--raw]

"completion" is what an editor would insert: the server's post-processing of the engine's middle
(decoding/postprocess.py: line policy, suffix overlap, brackets, indentation, whole lines above a
column-0 cursor's line, and for a task whose "language" is "python", the default, only what can be
Python there), with AR decoding again where diffusion leaves nothing to show (at a multi-line cursor in
Python, too little: postprocess.Shown.would_show), as the server asks;
"" where nothing is worth showing. "raw" is the engine's middle as decoded. With --raw the engine
answers without the fallback and "completion" is its raw middle.

A line that is not valid JSON or lacks "prefix"/"suffix" (or has a "language" that is not a
string) stops the run with its line number; nothing is written for it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..api import MAX_SPAN, MAX_STEPS, CompletionRequest
from ..core.checkpoint import CheckpointError
from ..core.files import unwritable, write_whole
from ..decoding.postprocess import Cursor, Shown
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
            if not isinstance(task.get("language", "python"), str):
                raise BatchInputError(f"{path}:{number}: \"language\" must be a string (a language id such as \"python\")")
            tasks.append(task)
    return tasks


def run(engine: Engine, tasks: list[dict], steps: int | None, span: int | None, mode: str, raw: bool = False):
    for task in tasks:
        prefix, suffix = task["prefix"], task.get("suffix", "")
        shown = Shown(Cursor(prefix, suffix), python=task.get("language", "python") == "python")
        t0 = time.perf_counter()
        result = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, steps=steps, span_length=span,
                                                   mode=mode, would_show=None if raw else shown.would_show))
        text = result.texts[0]
        yield {**task, "completion": text if raw else (shown.text(text) or ""), "raw": text,
               "latency_ms": round((time.perf_counter() - t0) * 1e3, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill batch", description="complete every line of a JSONL file")
    ap.add_argument("input", type=Path)
    ap.add_argument("output", type=Path)
    ap.add_argument("--steps", type=int, default=None, help="denoising steps T (default: the model's)")
    ap.add_argument("--span", type=int, default=None, help="span length L (default: the model's; 16 at a single-line cursor)")
    ap.add_argument("--mode", choices=("diffusion", "ar"), default="diffusion")
    ap.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--raw", action="store_true", help="the engine's middle as decoded, without the editor's "
                    "post-processing or the AR fallback")
    ap.add_argument("--eager", action="store_true", help="do not compile the CPU steps (compiling takes about two minutes on 2 cores)")
    args = ap.parse_args(argv)
    if args.output.exists() and args.input.exists() and args.output.samefile(args.input):
        ap.error(f"the output {args.output} is the input: name another file")
    for name, value, limit in (("--steps", args.steps, MAX_STEPS), ("--span", args.span, MAX_SPAN)):
        if value is not None and not 1 <= value <= limit:
            ap.error(f"{name} {value} is out of range; use 1..{limit}")
    # a file is written through DIR/NAME.partial, renamed once every row is in; a device or a pipe
    # (/dev/stdout) or a link is written as it is
    direct = args.output.is_symlink() or (args.output.exists() and not args.output.is_file())
    if (problem := unwritable(args.output)) and (not direct or args.output.is_dir()):   # before the model loads
        ap.error(f"the output {args.output}: {problem}")
    try:
        tasks = read_tasks(args.input)
        engine = Engine.load(args.model, device=args.device, compile=False if args.eager else None, wait=True)

        def write(path: Path) -> None:
            with path.open("w", encoding="utf-8") as out:
                for row in run(engine, tasks, args.steps, args.span, args.mode, args.raw):
                    out.write(json.dumps(row) + "\n")
        if direct:
            write(args.output)
        else:
            write_whole(args.output, write)
    except (OSError, ValueError, CheckpointError) as err:
        print(f"spanfill batch: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(tasks)} completions to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
