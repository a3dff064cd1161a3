"""Shared benchmark plumbing: timing with warm-up, percentiles, model selection, the server's status
as JSON, result files, settings compared task by task on held-out multi-line tasks."""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from spanfill.engine import percentile, summarise   # percentile: the one definition; the benchmarks import it from here

# where every benchmark writes (and report.py reads): benchmarks/results/, or $SPANFILL_RESULTS, so a
# second machine's figures land beside the first's instead of over them (cpu.sh's RESULTS=DIR)
RESULTS = Path(os.environ.get("SPANFILL_RESULTS") or Path(__file__).parent / "results")


def load_engine(model, eager: bool = False, before_compile=None, **kw):
    """The engine as the server runs it: with its compiled CPU steps in use (waits for the compile),
    or all eager with eager=True. before_compile(engine) runs first (a patch the graphs must see)."""
    from spanfill.engine import Engine, compiles_by_default
    engine = Engine.load(model, compile=False if eager or before_compile else None, wait=True, **kw)
    if before_compile is not None:
        before_compile(engine)
        if not eager and compiles_by_default(engine.model.embed.weight.device):
            engine.compile(wait=True)
    if engine.compiled is not None and not engine.compiled.ready:
        print(f"compiling failed, measuring eager: {engine.compiled.error}")
    if engine.compiled is not None:
        engine.compiled.strict = True    # a timed call that silently ran eagerly would mislabel the figure
    return engine


def add_task_args(ap) -> None:
    """The arguments of a benchmark that decodes held-out tasks (`spanfill eval`'s task builder)."""
    ap.add_argument("--model", default=None, help="checkpoint dir (default: the shipped model)")
    ap.add_argument("--data", type=Path, default=Path("data"), help="`spanfill data` output with held_out.jsonl")
    ap.add_argument("--single", type=int, default=300)
    ap.add_argument("--multi", type=int, default=150)
    ap.add_argument("--steps", type=int, default=4)


def alternate(engines: list, tasks, settings: list, decode) -> dict[tuple, list]:
    """Every setting on every held-out task in one process, so all see the same machine: each task's
    context cached first in every engine the settings use (as typing up to the cursor would), then the
    settings in an order that rotates with the task. decode(task, setting) -> one result; returns
    {(task.kind, setting): [results]}, with progress every 50 tasks on stderr."""
    from spanfill.engine import warm
    runs: dict[tuple, list] = {}
    for i, task in enumerate(tasks):
        for engine in engines:
            warm(engine, task)
        shift = i % len(settings)
        for setting in settings[shift:] + settings[:shift]:
            runs.setdefault((task.kind, setting), []).append(decode(task, setting))
        if (i + 1) % 50 == 0:
            print(f"{i + 1}/{len(tasks)} tasks", file=sys.stderr)
    return runs


def task_counts(tasks) -> dict[str, int]:
    """How many single- and multi-line tasks a run decoded (its result file's `tasks`), and line tasks where it had any."""
    lines = sum(t.kind == "line" for t in tasks)
    return {"single": sum(t.kind == "single" for t in tasks), "multi": sum(t.kind == "multi" for t in tasks),
            **({"line": lines} if lines else {})}


def paired(a: list, b: list) -> dict:
    """Scores of the same tasks, task by task, a against b: exact matches won and lost as shown, and the
    mean shown edit-similarity difference with its standard error."""
    diffs = [x.shown_edit_similarity - y.shown_edit_similarity for x, y in zip(a, b, strict=True)]
    se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else 0.0
    return {"won": sum(x.shown_exact_match and not y.shown_exact_match for x, y in zip(a, b)),
            "lost": sum(y.shown_exact_match and not x.shown_exact_match for x, y in zip(a, b)),
            "es_diff": statistics.fmean(diffs), "es_diff_se": se}


def task_key(task) -> tuple:
    """What makes two held-out tasks the same task (their ids number them per build, so ids do not)."""
    return task.kind, task.prefix, task.middle, task.suffix


def fresh_tasks(files, single: int, multi: int, after: tuple[int, int], tokenizer, span_length: int) -> list:
    """The tasks a build of after + (single, multi) makes that a build of `after` does not: the tasks
    beyond those a choice was made on. Not exactly as many as asked: fewer where the two builds cut a
    file alike or the split runs out, more where the larger build cuts each file more often."""
    from spanfill.engine import build_tasks
    seen = {task_key(t) for t in build_tasks(files, *after, tokenizer, span_length)}
    return [t for t in build_tasks(files, after[0] + single, after[1] + multi, tokenizer, span_length)
            if task_key(t) not in seen]


def add_multiline_args(ap, multi: int) -> None:
    """The arguments of a benchmark that compares a setting's values on held-out multi-line tasks of
    several splits (`compare_multiline`)."""
    ap.add_argument("--model", default=None, help="checkpoint dir (default: the shipped model)")
    ap.add_argument("--data", type=Path, nargs="+", default=[Path("data")], help="`spanfill data` outputs with held_out.jsonl")
    ap.add_argument("--multi", type=int, default=multi, help="multi-line tasks per split (fewer where a split has fewer)")
    ap.add_argument("--after", type=int, default=0, metavar="M",
                    help="only each split's tasks beyond its first M (to confirm a choice made on those; about "
                         "--multi of them, not exactly: common.fresh_tasks)")


def _split_rows(runs: dict, settings: list, split: str, key: str) -> list[dict]:
    """One row per setting ((mode, value); ("ar", None) is AR) of one split's multi-line runs: its
    summary, and its paired comparison with the first setting and with AR."""
    first, ar = runs[("multi", settings[0])], runs[("multi", ("ar", None))]
    return [{"split": split, "mode": mode, key: value, **summarise(runs[("multi", (mode, value))]),
             "vs_first": paired(runs[("multi", (mode, value))], first), "vs_ar": paired(runs[("multi", (mode, value))], ar)}
            for mode, value in settings]


def compare_multiline(engine, args, argv, name: str, key: str, mode: str, decode, **payload) -> int:
    """The held-out multi-line tasks of each of args.data's splits (args.multi each, fewer where a split
    has fewer; with args.after M, those beyond the split's first M) decoded under every value of a
    setting (args.<key>s, the first the baseline; decode(task, value) -> Score) and by AR of the same
    weights, alternating task by task (`alternate`): rows over all splits' tasks (split "all"), then
    per split, each paired with the baseline and with AR; printed, and written to results/<name>.json
    with `payload`. A split with no multi-line task has no rows; none at all is an error (exit status 1)."""
    from spanfill.engine import read_split, score
    values = getattr(args, key + "s")
    settings = [(mode, v) for v in values] + [("ar", None)]

    def run(task, setting):
        return score(engine, task, mode="ar") if setting[0] == "ar" else decode(task, setting[1])
    rows, every = [], {}
    for data in args.data:
        tasks = fresh_tasks(read_split(data / "held_out.jsonl"), 0, args.multi, (0, args.after), engine.tokenizer,
                            engine.model.cfg.span_length)
        if not tasks:
            print(f"{data}: no multi-line task", file=sys.stderr)
            continue
        runs = alternate([engine], tasks, settings, run)
        rows += _split_rows(runs, settings, str(data), key)
        for k, scores in runs.items():
            every.setdefault(k, []).extend(scores)
    if not every:
        print("no multi-line task in any split: nothing written", file=sys.stderr)
        return 1
    rows = _split_rows(every, settings, "all", key) + rows
    for r in rows:
        label = "AR" if r["mode"] == "ar" else f"{key}={r[key]}"
        print(f"{r['split']:<20} {label:<14} {r['tasks']:4d} tasks  shown EM {r['shown_exact_match']:6.1%}  "
              f"ES {r['shown_edit_similarity']:.3f}  vs first {r['vs_first']['es_diff']:+.4f} ± {r['vs_first']['es_diff_se']:.4f}  "
              f"vs AR {r['vs_ar']['es_diff']:+.4f} ± {r['vs_ar']['es_diff_se']:.4f}  chars {r['shown_chars_mean']:5.1f} "
              f"(reference {r['reference_chars_mean']:5.1f})  p50 {r['latency_median_ms']:6.1f} ms")
    out = write(name, {"engine": engine.info, key + "s": values, **payload, "splits": [str(d) for d in args.data],
                       "rows": rows,
                       "command": f"python benchmarks/{name}.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


def add_server_args(ap) -> None:
    """The arguments of a benchmark that types held-out code into `spanfill serve` (replay, soak)."""
    ap.add_argument("--model", help="model directory passed to the server (default: the shipped model)")
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda (default: auto)")
    ap.add_argument("--data", type=Path, default=Path("data"), help="`spanfill data` output with held_out.jsonl")
    ap.add_argument("--interval-ms", type=float, default=60.0, help="time between keystrokes (default: 60)")


def parse_server_run(parse_args, argv, name: str):
    """(args, the held-out split's path) for a benchmark that types into the server; the path is None,
    after saying how to make it, where `spanfill data` has not been run."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.argv = argv
    held_out = args.data / "held_out.jsonl"
    if not held_out.is_file():
        sys.stderr.write(f"{name}: {held_out} does not exist; run `spanfill data --out {args.data}` or pass --data DIR\n")
        return args, None
    return args, held_out


def compiled_step(engine, span, context_len: int, kv):
    """A callable running the engine's compiled denoising step once (forward, pick, commit: the first
    of 4 steps) on copies of a fresh span, with inference tensors as the engine passes them."""
    V, L = engine.model.cfg.vocab_size, span.shape[1]
    with torch.inference_mode():
        bias = torch.zeros(V).index_fill_(0, torch.tensor([engine.tokenizer.special.mask]), float("-inf"))
        first_bias, masked = torch.zeros(V), torch.ones(1, L, dtype=torch.bool)

    def step():
        with torch.inference_mode():
            engine.compiled.denoise_step(span.clone(), masked.clone(), context_len, kv, bias, first_bias,
                                         engine.repeatable, 4)
    return step


def timed(fn, repeats: int, warmup: int = 3) -> list[float]:
    """Milliseconds per call of fn(), after `warmup` unmeasured calls (gpt-fast style)."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def summary(ms: list[float]) -> dict:
    return {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(percentile(ms, 95), 3), "runs": len(ms)}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() says only "x86_64" on Linux)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    from spanfill.engine import cpu_has_fast_bf16
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_model": cpu_model(), "cpu_fast_bf16": cpu_has_fast_bf16(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            # runnable processes over the last 1, 5, 15 minutes as the result is written: above what the
            # benchmark itself runs, something else shared the cores while it measured
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def as_dict(value):
    """pygls hands back unknown results (spanfill/status) as namedtuples; JSON wants dicts."""
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    return value


def write(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    return path
