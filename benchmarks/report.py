"""Write benchmarks/README.md: the benchmark tables, rendered from the result files the benchmarks
wrote under benchmarks/results/ (one section per directory: one machine and dtype each).

    python benchmarks/report.py                # regenerates benchmarks/README.md (cpu.sh runs it last)
    python benchmarks/report.py --out -        # prints it instead

Reads eval.json (`spanfill eval`), engine_sweep.json, engine_micro_model.json, limit.json,
span_cut.json, int8.json, replay.json and the replay's thread/load variants (replay_*.json), protocol_rtt.json,
tokenize_time.json, gpu_latency.json (gpu.sh), families[_cuda].json (benchmarks/families.py),
length.json, head_quantile.json, span_lengths.json, fallback_share.json, check.json, line_start.json, train_throughput.json and soak.json; a missing file leaves its table out.
report_sections.py and report_replay.py render the sections; this file puts each directory's together under its machine,
with the goals table. Nothing here measures anything: every number is copied from a result file,
beside the command that wrote it, the date it was written and the machine it names.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

from report_format import ms, pct, shown, table
from report_replay import REPLAY_VARIANTS, protocol_rtt_section, replay_goal_row, replay_section, threads_section
from report_sections import (by_kind, check_section, cold_rows, eval_section, fallback_share_section,
                             families_section, gpu_section, head_quantile_section, int8_section, length_section,
                             limit_section, line_start_section, micro_section, soak_section, span_cut_section, span_lengths_section,
                             sweep_section, tokenize_time_section, train_throughput_section, windows_section)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE / "README.md"
GOALS = {"speed_vs_ar": 4.0, "speed_vs_generate": 4.0, "step_vs_stream_bound": 2.0, "exact_match_t4": 0.25,
         "em_points_below_ar": 3.0, "speed_at_equal_em": 3.0}   # issues 5 and 6


def load(directory: Path, name: str) -> dict | None:
    path = directory / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def written_on(path: Path, report: dict) -> str:
    """The day a result file was written: its own `date` field, else its last commit's date while the
    file is unchanged since, else its modification time."""
    if report.get("date") or report.get("machine", {}).get("date"):
        return report.get("date") or report["machine"]["date"]
    try:
        git = lambda *a: subprocess.run(["git", *a, "--", path.name], cwd=path.parent, capture_output=True,  # noqa: E731
                                        text=True, check=True).stdout.strip()
        if not git("status", "--porcelain") and (day := git("log", "-1", "--format=%cs")):
            return day
    except (OSError, subprocess.CalledProcessError):
        pass
    return date.fromtimestamp(path.stat().st_mtime).isoformat()


GOAL_SOURCES = ("eval", "engine_sweep", "replay", "limit")


def goals_section(directory: Path, where: str) -> list[str]:
    """The project's latency and quality goals against this directory's results, where they measure them."""
    ev, sweep, replay, limit = (load(directory, n) for n in GOAL_SOURCES)
    rows = []
    ratio = lambda slow, fast: slow["latency_median_ms"] / fast["latency_median_ms"]   # noqa: E731
    met = lambda ok: "yes" if ok else "no"   # noqa: E731
    d4 = ar = None
    if ev:
        by = by_kind(ev)
        d4, ar = by.get(("single", "diffusion T=4")), by.get(("single", "AR"))
    if d4 and ar:
        x = ratio(ar, d4)
        rows.append([f"diffusion T=4 ≥ {GOALS['speed_vs_ar']:.0f}× faster per completion than AR of the same weights",
                     f"{x:.1f}× single-line, context cached ({ms(d4['latency_median_ms'])} vs "
                     f"{ms(ar['latency_median_ms'])} ms, held-out eval)", met(x >= GOALS["speed_vs_ar"])])
    cold = cold_rows(sweep) if sweep else (None, None, None)
    if cold[0] and cold[2]:
        x = ratio(cold[2], cold[0])
        rows.append([f"diffusion T=4 ≥ {GOALS['speed_vs_generate']:.0f}× faster than `transformers` `generate()`",
                     f"{x:.1f}× cold ({ms(cold[0]['latency_median_ms'])} vs {ms(cold[2]['latency_median_ms'])} ms, sweep)",
                     met(x >= GOALS["speed_vs_generate"])])
    if replay and (row := replay_goal_row(replay)):
        rows.append(row)
    if limit:
        x = limit["ratio_to_weight_stream_bound"]
        rows.append([f"span step within {GOALS['step_vs_stream_bound']:.0f}× of streaming the weights from DRAM",
                     f"{x}× ({ms(limit['step']['median_ms'])} vs {ms(limit['weight_stream_bound_ms'])} ms, limit)",
                     met(x <= GOALS["step_vs_stream_bound"])])
    if d4 and ar:
        em = d4["exact_match"]
        rows.append([f"held-out single-line exact match at T=4 ≥ {100 * GOALS['exact_match_t4']:.0f}%",
                     f"{pct(em)} raw, {shown(d4, 'shown_exact_match', pct)} shown", met(em >= GOALS["exact_match_t4"])])
        below = 100 * (ar["exact_match"] - d4["exact_match"])
        x = ratio(ar, d4)
        rows.append([f"T=4 exact match within {GOALS['em_points_below_ar']:.0f} points of AR, and "
                     f"≥ {GOALS['speed_at_equal_em']:.0f}× faster",
                     f"{pct(d4['exact_match'])} vs {pct(ar['exact_match'])} raw ({below:.1f} points below); {x:.1f}×",
                     f"exact match {met(below <= GOALS['em_points_below_ar'])}, speed {met(x >= GOALS['speed_at_equal_em'])}"])
    if not rows:
        return []
    return [f"**Goals** ({where}shipped model, L=32; the goals of issues 5 and 6, each against the table it comes from):",
            "", table(["goal", "measured", "met?"], rows)]


SECTIONS = (("eval", eval_section), ("engine_sweep", sweep_section), ("engine_micro_model", micro_section),
            ("limit", limit_section), ("span_cut", span_cut_section), ("int8", int8_section),
            ("replay", replay_section), ("protocol_rtt", protocol_rtt_section), ("tokenize_time", tokenize_time_section), ("gpu_latency", gpu_section),
            ("families", families_section),
            ("families_cuda", families_section), ("length", length_section), ("head_quantile", head_quantile_section),
            ("span_lengths", span_lengths_section),
            ("fallback_share", fallback_share_section),
            ("check", check_section),
            ("line_start", line_start_section), ("windows", windows_section),
            ("train_throughput", train_throughput_section), ("soak", soak_section))


def machine(directory: Path) -> tuple[str, str]:
    """(short name, full line) of the machine a directory's results come from, as the benchmarks recorded it."""
    reports = [r for name in ("limit", "engine_micro_model", "engine_sweep", "replay", "int8", "span_cut", "gpu_latency",
                              "families", "families_cuda", "length", "head_quantile", "span_lengths", "fallback_share", "check", "line_start", "windows", "train_throughput", "tokenize_time", "soak")
               if (r := load(directory, name)) is not None and "machine" in r]
    if not reports:
        return "machine not recorded", "Machine: not recorded in these result files."
    m = reports[0]["machine"]
    if m.get("cuda"):
        return m["cuda"], f"Machine: {m['cuda']}; torch {m.get('torch')}; {m.get('platform')}."
    cpus = f"{m['cpus']} CPUs" if m.get("cpus") else f"{m.get('threads')} threads"
    name, notes = f"{m.get('cpu_model') or m.get('processor', 'CPU')}, {cpus}", []
    if not m.get("cpu_model"):
        notes.append("the CPU's model name was not recorded")
    if m.get("cpu_fast_bf16") is not None:
        name += ", fast bf16" if m["cpu_fast_bf16"] else ", no fast bf16"
        notes.append("AVX-512-BF16 or AMX" if m["cpu_fast_bf16"] else "no AVX-512-BF16 or AMX")
    elif any(engine_of(r).get("dtype") == "bfloat16" and engine_of(r).get("device") == "cpu" for r in reports):
        name += ", fast bf16"
        notes.append("the engine chose bfloat16, which it does only on a CPU with AVX-512-BF16 or AMX")
    return name, f"Machine: {name} ({'; '.join(notes)}); torch {m.get('torch')}; {m.get('platform')}."


def engine_of(report: dict) -> dict:
    engine = report.get("engine") or report.get("model")
    return engine if isinstance(engine, dict) else {"dtype": report.get("dtype"), "device": report.get("device")}


def directory_section(directory: Path, results: Path = RESULTS) -> str | None:
    present = [(name, render, r) for name, render in SECTIONS if (r := load(directory, name)) is not None]
    if not present:
        return None
    short, full = machine(directory)
    engine = engine_of(present[0][2])
    dtype = f"{engine.get('dtype')}{' with int8 matmuls' if engine.get('int8_matmuls') else ''}"
    rel = Path(os.path.relpath(directory, HERE.parent)).as_posix()
    setting = "" if directory == results else f" (`RESULTS={rel}` for cpu.sh, `SPANFILL_RESULTS` for one script)"
    days = sorted({written_on(directory / f"{name}.json", r) for name, _, r in present})
    out = [f"## {short}: {dtype}", "",
           f"{full} Results in `{rel}/`{setting}, written {' to '.join(dict.fromkeys([days[0], days[-1]]))}."]
    stamp = lambda name, r: f"{written_on(directory / f'{name}.json', r)}, {short}; "   # noqa: E731
    # dated by the newest of the files the goals are read from, not by the directory's newest file
    goal_days = sorted(written_on(directory / f"{n}.json", r) for n, _, r in present if n in GOAL_SOURCES)
    goals = goals_section(directory, f"{goal_days[-1] if goal_days else days[-1]}, {short}; ")
    if goals:
        out += ["", "\n".join(goals)]
    for name, render, report in present:
        out += ["", "\n".join(render(report, stamp(name, report)))]
    variants = {n: r for n in REPLAY_VARIANTS if (r := load(directory, n)) is not None}
    if len(variants) > 1:
        out += ["", "\n".join(threads_section(variants, stamp("replay", variants["replay"])))]
    plots = sorted(p.name for p in directory.glob("*.png"))
    if plots:
        out += ["", "Plots: " + " · ".join(f"[{p}]({Path(os.path.relpath(directory / p, HERE)).as_posix()})" for p in plots)]
    return "\n".join(out)


INTRO = """# spanfill benchmarks

This file is generated: `python benchmarks/report.py` writes it from the result files under
`benchmarks/results/`, one section per directory (one machine and dtype each). To change a figure, rerun
the benchmark that wrote it, then the report.

## Running them

| script | measures |
|---|---|
| `spanfill eval --data DATA` | held-out exact match, edit similarity and latency for T ∈ {1,2,4,8}, the fixed rule and AR |
| `benchmarks/engine_micro.py [--model DEFAULT]` | per-step and per-completion latency for T ∈ {1,2,4,8} and AR, context cached |
| `benchmarks/engine_sweep.py` | L ∈ {16,32,64} × T ∈ {1,2,4,8} + threshold, AR and `transformers` `generate()` on the same weights: latency, tokens/s, exact match |
| `benchmarks/replay.py` | typing held-out files key by key through the real server over stdio: keystroke to suggestion p50/p95/p99, the share of keystrokes unanswered before the next, round trips, cache share, KV reuse, the server's engine time |
| `benchmarks/protocol_rtt.py` | the protocol's own round trip through the real server over stdio (completions off): a keystroke's didChange and inlineCompletion, and a status request, with stdin read on the event loop against pygls's reader thread, two servers taking turns |
| `benchmarks/tokenize_time.py` | tokenize time per keystroke while typing into a large held-out file: the server's context windows and the engine's tokenize stage, windows from the line-piece memo against every window encoded whole, alternating in one process |
| `benchmarks/limit.py` | per-step time against the weight-streaming and FLOP bounds of this machine |
| `benchmarks/span_cut.py` | the span cut to length.SHRINK_TO's lengths (default) against the whole span, alternating in one process |
| `benchmarks/span_lengths.py --data DATA DATA2 --multi 300 --cuts 16,8 24,16,8` | the lengths a multi-line span is cut down to, compiled, and AR alternating task by task as the server asks: exact match and edit similarity as shown, paired against the first set and AR, chars shown, latency |
| `benchmarks/int8.py` | fp32 against int8 matmuls (`dtype` `int8`), two engines alternating in one process |
| `benchmarks/gpu_sweep.py` | on CUDA: L × T through CUDA graphs and eagerly, AR, the Triton confidence kernel |
| `benchmarks/families.py --threads 1` | the public diffusion checkpoints' real shapes with random weights: prefill, span step, head and whole completions with and without the dual cache (latency only) |
| `benchmarks/length.py --data DATA --eager --single 300 --multi 150` | the length strategies and AR alternating task by task: exact match and edit similarity as shown, chars shown beside the reference's, latency |
| `benchmarks/head_quantile.py --data DATA DATA2 --multi 500 --quantiles 0.3 0.4 0.5 --eager` | where the length head ends a multi-line span: quantiles of its count distribution and AR alternating task by task, as the server asks: exact match and edit similarity as shown, paired against the first quantile and AR, chars shown |
| `benchmarks/fallback_share.py --data DATA DATA2 --multi 600 --shares 0.5 0.9 1.0` | when a multi-line diffusion candidate is worth showing: the share of it the editor must show, or AR decodes again, and AR alternating task by task: exact match and edit similarity as shown, paired against the first share and AR, requests that fell back |
| `benchmarks/check.py --data DATA --single 1000 --multi 200` | the AR check of diffusion's draft at several acceptances, the draft unchecked and AR alternating task by task: exact match and edit similarity as shown, chars shown, draft tokens kept, latency, paired wins and losses |
| `benchmarks/checkpoints.py --data DATA --models shipped RUN --single 1000 --multi 200 --eager` | checkpoints side by side as the server asks, task by task: exact match and edit similarity as shown, paired wins and losses against the first with a sign test (whether a new checkpoint ships); `--fresh-after S M` confirms the winner on tasks beyond those it was chosen on |
| `benchmarks/fresh_set.py --out FRESH --corpus DATA DATA2` | a judging set of code no model trained on: the source of the pinned packages of `engine/training/fresh_packages.txt`, less every copy or version of a file of the named corpus builds; `checkpoints.py --data FRESH` judges on it |
| `benchmarks/windows.py --data DATA --eager --shares 0.75 0.95 1` | the context windows cut to shares of the budget, completed as the server asks, task by task: exact match and edit similarity as shown, against the largest share |
| `benchmarks/train_throughput.py --data DATA` | a training step's tokens/s and model FLOPs against a matmul's rate: eager or compiled, fp32 or bf16, padded or bucketed batches, batch sizes |
| `benchmarks/soak.py --data DATA` | a long typing run (`--minutes`, default 30) through the real server with documents opened and closed around it: RSS growth and round-trip drift once warm, failures; then RSS and answers with many documents open, a large document and a long single line |

```sh
DATA=/path/to/data bash benchmarks/cpu.sh      # all CPU benchmarks on the shipped model, then this file
SOAK=1 DATA=... bash benchmarks/cpu.sh          # the same and the 30-minute soak
RESULTS=benchmarks/results/NAME DATA=... bash benchmarks/cpu.sh   # another machine's results beside these
bash benchmarks/gpu.sh                          # on a CUDA machine: kernel and CUDA-graph tests, then gpu_sweep.py
python benchmarks/report.py                     # this file, from what is under benchmarks/results/
```

`DATA` is what `spanfill data` writes (cpu.sh builds it when missing); its held-out files were never
trained on. `MODEL=DIR` benchmarks another checkpoint. cpu.sh takes more than 30 minutes on a 2-core
machine, and `SOAK=1` adds the soak's 30; run it on an otherwise idle one, since every benchmark times
what runs beside it. gpu.sh writes to `benchmarks/results/gpu/` (or `$OUT`).

## Reading the tables

* Latencies are medians and p95 over many runs after warm-up. Speed claims are ratios measured in one
  run against a baseline: AR decoding of the same weights, and `transformers` `generate()` on the same
  weights exported as a Llama checkpoint. A shared machine's speed moves between runs, so compare
  ratios within one table, not figures across tables, runs or machines.
* *warm*: the task's context is already in the KV cache, as while typing; *cold*: the whole context is
  encoded inside the timed call.
* *raw*: the engine's middle; *shown*: after the server's post-processing, what an editor shows.
* *keystroke to suggestion* (the replay; the latency goals are judged on it): for every keystroke, the
  time from sending it to the first answer the editor shows for it or for a later keystroke of the same
  function body. An answer is shown when it arrives before the next keystroke; a later one answers a
  text already changed and is dropped, so a keystroke whose request the next one cancelled waits on
  until a later keystroke's answer arrives, and the last keystroke of a body waits for its own. An empty
  answer ends the wait (the editor then shows no ghost text; the tables say how many waits ended so).
  A keystroke after which nothing is shown before the body ends waits for ever: a percentile that falls
  on it reads *never*. *Round trip* times the answered requests alone, which leaves out exactly the
  slow requests that a keystroke cancelled.
* *compiled steps* in a caption: the engine ran with its compiled CPU steps (the benchmarks wait for the
  compile). In these results they covered the model's default span (L=32) and the `content` rule; the
  sweep's L=16 and L=64 rows and the `fixed` and threshold rows ran eagerly, so their quality compares
  with the others, not their latency.
"""


def render(results: Path = RESULTS) -> str:
    directories = [results] + sorted(p for p in results.iterdir() if p.is_dir()) if results.is_dir() else []
    sections = [s for d in directories if (s := directory_section(d, results))]
    return INTRO + "".join("\n" + s + "\n" for s in sections)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(README), help="where to write (default: benchmarks/README.md; - prints)")
    args = ap.parse_args(argv)
    text = render()
    if args.out == "-":
        print(text, end="")
    else:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
