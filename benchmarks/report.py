"""Write benchmarks/README.md: the benchmark tables, rendered from the result files the benchmarks
wrote under benchmarks/results/ (one section per directory: one machine and dtype each).

    python benchmarks/report.py                # regenerates benchmarks/README.md (cpu.sh runs it last)
    python benchmarks/report.py --out -        # prints it instead

Reads eval.json (`spanfill eval`), engine_sweep.json, engine_micro_model.json, limit.json,
span_cut.json, int8.json, replay.json and the replay's thread/load variants (replay_*.json),
gpu_latency.json (gpu.sh) and families[_cuda].json (benchmarks/families.py); a missing file leaves
its table out. Nothing here measures anything: every number is copied from a result file, beside
the command that wrote it, the date it was written and the machine it names.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

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


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ms(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def speed(baseline_ms: float, this_ms: float) -> str:
    """How this compares with the baseline: '1.60x faster', or '1.25x slower' where it takes longer."""
    x = baseline_ms / this_ms
    return f"{x:.2f}x faster" if x >= 1 else f"{1 / x:.2f}x slower"


def decoding_label(row: dict) -> str:
    """'AR', 'diffusion T=4', or 'diffusion T=4, fixed rule' (the default rule goes unnamed)."""
    if row["mode"] == "ar":
        return "AR"
    rule = row.get("rule", "content")
    return f"diffusion T={row['steps']}" + ("" if rule == "content" else f", {rule} rule")


def engine_line(info: dict) -> str:
    steps = "compiled steps" if info.get("compiled") else "eager"
    int8 = " with int8 matmuls" if info.get("int8_matmuls") else ""
    return (f"{info.get('params', 0) / 1e6:.1f}M-parameter model, {info.get('dtype')}{int8} on {info.get('device')}, "
            f"{steps}, L={info.get('span_length')}")


def shown(row: dict, key: str, fmt) -> str:
    return fmt(row[key]) if key in row else "-"    # a result file without the shown scores


def by_kind(report: dict) -> dict:
    return {(r["kind"], decoding_label(r)): r for r in report["results"]}


def eval_section(report: dict, where: str = "") -> list[str]:
    rows = []
    for r in sorted(report["results"], key=lambda r: (r["kind"] != "single", r["mode"] == "ar", r.get("rule", ""),
                                                     r["steps"] or 0)):
        rows.append([f"{r['kind']}-line", decoding_label(r), r["tasks"],
                     pct(r["exact_match"]), f"{r['edit_similarity']:.3f}", shown(r, "shown_exact_match", pct),
                     shown(r, "shown_edit_similarity", "{:.3f}".format), ms(r["latency_median_ms"]),
                     ms(r["latency_p95_ms"]), f"{r['forward_passes_mean']:.1f}",
                     shown(r, "shown_chars_mean", "{:.1f}".format), shown(r, "reference_chars_mean", "{:.1f}".format)])
    out = [f"**Held-out quality and latency** ({where}{engine_line(report['model'])}; `{report['command']}`). "
           "*raw*: the engine's middle; *shown*: after the server's post-processing, what an editor shows:", "",
           table(["task", "decoding", "tasks", "exact match (raw)", "edit sim. (raw)", "exact match (shown)",
                  "edit sim. (shown)", "p50 ms", "p95 ms", "forward passes", "chars shown", "chars in reference"], rows)]
    by = by_kind(report)
    ar = by.get(("single", "AR"))
    for steps in (4, 8):    # the goals' T, and T=8 (one token per pass on most single lines) beside it
        d = by.get(("single", f"diffusion T={steps}"))
        if d and ar:
            out += ["", f"Single-line, T={steps} vs. AR of the same weights: exact match {pct(d['exact_match'])} vs. "
                        f"{pct(ar['exact_match'])} raw, {shown(d, 'shown_exact_match', pct)} vs. "
                        f"{shown(ar, 'shown_exact_match', pct)} shown, median latency {ms(d['latency_median_ms'])} vs. "
                        f"{ms(ar['latency_median_ms'])} ms: **{speed(ar['latency_median_ms'], d['latency_median_ms'])}**."]
    return out


def sweep_section(report: dict, where: str = "") -> list[str]:
    rows = [[r["name"], r["kind"], ms(r["latency_median_ms"]), ms(r["latency_p95_ms"]), f"{r['tokens_per_s']:.0f}",
             pct(r["exact_match"]), f"{r['edit_similarity']:.3f}"] for r in report["rows"]]
    out = [f"**Engine sweep** ({where}{report['tasks']} held-out single-line tasks, {engine_line(report['engine'])}; "
           f"`{report['command']}`). *warm*: the task's context is already in the KV cache, as while typing; "
           "*cold*: the context is encoded inside the timed call (the like-for-like comparison with `generate()`).", "",
           table(["decoding", "context", "p50 ms", "p95 ms", "tokens/s", "exact match", "edit sim."], rows)]
    d4, ar, hf = cold_rows(report)
    if d4 and ar and hf:
        out += ["", f"Cold, L=32, T=4 diffusion: {speed(ar['latency_median_ms'], d4['latency_median_ms'])} per "
                    f"completion than AR mode of the same weights and {speed(hf['latency_median_ms'], d4['latency_median_ms'])} "
                    f"than `transformers` `generate()` (median latency, one run)."]
    if report.get("generate_equals_ar") is not None:
        dtype = report["engine"].get("dtype", "")
        rest = ("" if report["generate_equals_ar"] >= 1 else
                f"; on the rest the two diverge somewhere (both run {dtype}, through different kernels)")
        out += [f"`generate()` on the Llama export wrote exactly spanfill's AR-mode text on "
                f"{pct(report['generate_equals_ar'])} of the tasks{rest}."]
    return out


def cold_rows(report: dict) -> tuple:
    by = {(r["name"], r["kind"]): r for r in report["rows"]}
    return (by.get(("diffusion L=32 T=4", "cold")), by.get(("AR L=32", "cold")),
            by.get(("transformers generate() L=32", "cold")))


def micro_section(report: dict, where: str = "") -> list[str]:
    rows = [[r["what"], ms(r["median_ms"]), ms(r["p95_ms"])] for r in report["rows"]]
    out = [f"**Per step and per completion** ({where}{engine_line(report['engine'])}, context of "
           f"{report['context_tokens']} tokens cached; `python benchmarks/engine_micro.py --model DEFAULT`):", "",
           table(["what", "median ms", "p95 ms"], rows)]
    seconds = report["engine"].get("compile_seconds")
    if seconds:
        out += ["", f"Compiling the steps (in the background, at load) took {seconds:.0f} s in this run."]
    return out


def cached_bound(r: dict) -> str:
    if "weight_read_bound_ms" not in r:
        return ""
    return (f"; reading them at the {r['weight_sized_read_bandwidth_gbs']:.1f} GB/s measured on a weight-sized "
            f"array (cache-resident, as the weights are between steps) takes {ms(r['weight_read_bound_ms'])} ms "
            f"(**{r['ratio_to_weight_read_bound']}x**)")


def kv_bound(r: dict) -> str:
    if "weight_and_kv_stream_bound_ms" not in r:
        return ""
    return (f", or {ms(r['weight_and_kv_stream_bound_ms'])} ms with the {r['kv_bytes'] / 1e6:.1f} MB of cached keys "
            f"and values its attention reads too (**{r['ratio_to_weight_and_kv_stream_bound']}x**)")


def limit_section(r: dict, where: str = "") -> list[str]:
    kind = "compiled" if r["engine"].get("compiled") else "eager"
    eager = f" (eager: {ms(r['eager_step']['median_ms'])} ms)" if "eager_step" in r and kind == "compiled" else ""
    return [f"**Limit** ({where}{r['engine'].get('dtype')}; `python benchmarks/limit.py`): one {kind} span step "
            f"(L={r['span_length']}, context {r['context_tokens']}) "
            f"takes {ms(r['step']['median_ms'])} ms{eager}; streaming the {r['weight_bytes'] / 1e6:.1f} MB of weights once at the "
            f"measured {r['read_bandwidth_gbs']:.1f} GB/s DRAM read rate takes {ms(r['weight_stream_bound_ms'])} ms "
            f"(**{r['ratio_to_weight_stream_bound']}x**){kv_bound(r)}{cached_bound(r)}, and its {r['step_gflop']:.2f} GFLOP at the measured "
            f"{r['matmul_gflops']:.0f} GFLOP/s matmul rate take {ms(r['flop_bound_ms'])} ms (**{r['ratio_to_flop_bound']}x**)."
            + breakdown(r)]


def breakdown(r: dict) -> str:
    b = r.get("step_breakdown_ms")
    if not b:    # not profiled (a GPU run)
        return ""
    share = lambda part: f"{100 * b[part] / b['profiled_ms']:.0f}%"   # noqa: E731
    compiled = r["engine"].get("compiled")
    kernels = "its matmuls and fused C++ loops" if compiled else "its matmuls"
    other = "Dynamo's guards, wrappers and cache views" if compiled else "its other ops and their dispatch"
    return (f" Profiled (20 steps; the parts add up to {ms(b['profiled_ms'])} ms per step), the step spends "
            f"{share('kernels')} in {kernels}, {share('attention')} in attention over the cached context "
            f"(PyTorch's flash-attention kernel) and {share('other')} in {other}.")


def span_cut_section(r: dict, where: str = "") -> list[str]:
    rows = [[r_["kind"] + "-line", r_["setting"], r_["tasks"], pct(r_["exact_match"]), f"{r_['edit_similarity']:.3f}",
             ms(r_["latency_median_ms"]), ms(r_["latency_p95_ms"]), f"{r_['forward_passes_mean']:.2f}"]
            for r_ in sorted(r["rows"], key=lambda x: (x["kind"] != "single", x["setting"] != "whole"))]
    by = {(x["kind"], x["setting"]): x["latency_median_ms"] for x in r["rows"]}
    gains = ", ".join(f"{kind}-line {speed(by[kind, 'whole'], by[kind, 'cut'])}" for kind in ("single", "multi")
                      if (kind, "cut") in by and (kind, "whole") in by)
    return [f"**Span cut** ({where}`{r.get('command', 'python benchmarks/span_cut.py')}`; {engine_line(r['engine'])}, "
            f"T={r['steps']}): the span cut to {', '.join(map(str, r['cut_to']))} once its tail is committed pads "
            f"(*cut*, the default) against the whole span for every step (*whole*), alternating task by task in one "
            f"process; the cut span's median: {gains}:", "",
            table(["task", "span", "tasks", "exact match", "edit sim.", "median ms", "p95 ms", "forward passes"], rows)]


def int8_section(r: dict, where: str = "") -> list[str]:
    order = {"single": 0, "multi": 1}
    rows = [[x["kind"] + "-line", f"T={x['steps']}" if x["mode"] == "diffusion" else "AR", x["dtype"], x["tasks"],
             pct(x["exact_match"]), pct(x["shown_exact_match"]), f"{x['edit_similarity']:.3f}",
             ms(x["latency_median_ms"]), ms(x["latency_p95_ms"])]
            for x in sorted(r["rows"], key=lambda x: (order[x["kind"]], x["mode"] == "ar", x["dtype"]))]
    by = {(x["kind"], x["mode"], x["dtype"]): x["latency_median_ms"] for x in r["rows"]}
    gains = ", ".join(f"{kind}-line {'AR' if mode == 'ar' else 'T=' + str(r['steps'])} "
                      f"{speed(by[kind, mode, 'fp32'], by[kind, mode, 'int8'])}"
                      for kind in ("single", "multi") for mode in ("diffusion", "ar") if (kind, mode, "int8") in by)
    compile_s = {dtype: info.get("compile_seconds") for dtype, info in r["engines"].items()}
    compiled = (f"; compile {compile_s['fp32']:.0f} s (fp32) vs {compile_s['int8']:.0f} s (int8)"
                if None not in compile_s.values() else "")
    return [f"**int8 matmuls** ({where}`{r['command']}`; {engine_line(r['engines']['fp32'])}): the fp32 engine against "
            f"the same weights with int8 matmuls (`dtype` `int8`, the default on a CPU without fast bf16), two "
            f"engines in one process alternating task by task{compiled}; int8's median: {gains}:", "",
            table(["task", "decoding", "matmuls", "tasks", "exact match (raw)", "exact match (shown)", "edit sim.",
                   "median ms", "p95 ms"], rows)]


def keystroke_waits(r: dict) -> dict | None:
    """A replay's keystroke-to-suggestion percentiles. A result file without them has the round trips
    of answered requests alone: where no keystroke was cancelled or left unanswered, each keystroke's
    wait is its own round trip, so those are the figures; otherwise they are unknown (None)."""
    if "keystroke_to_suggestion_ms" in r:
        return r["keystroke_to_suggestion_ms"]
    req = r["requests"]
    return r["latency_ms"] if req["cancelled"] == req["failed"] == 0 else None


def wait_ms(x: float | None) -> str:
    return "never" if x is None else ms(x)    # a percentile that fell on a keystroke never answered


def replay_section(r: dict, where: str = "") -> list[str]:
    lat, src, req = r["latency_ms"], r["latency_ms_by_source"], r["requests"]
    server = r.get("server", {})
    wait, engine = keystroke_waits(r), server.get("engineMs") or {}
    rows = [["keystroke to suggestion, every keystroke", wait["count"], *(wait_ms(wait[q]) for q in ("p50", "p95", "p99"))]
            ] if wait else []
    rows.append(["round trip, requests answered before the next key", lat.get("count"),
                 *(ms(lat[q]) for q in ("p50", "p95", "p99"))])
    for name in ("engine", "cache"):
        if src[name].get("count"):
            rows.append([f"… of which from the {name}", src[name]["count"], *(ms(src[name][q]) for q in ("p50", "p95", "p99"))])
    if "p50" in engine:
        rows.append(["engine call, inside the server", engine.get("count", "-"), *(ms(engine[q]) for q in ("p50", "p95", "p99"))])
    reuse = server.get("contextReuseRate")
    compiled = {True: "compiled CPU steps", False: "eager", None: "eager"}[r.get("compiled")]
    threads = f", {r['threads']} thread{'s' if r['threads'] != 1 else ''}" if r.get("threads") else ""
    dtype = f"{r.get('dtype')}{' with int8 matmuls' if server.get('int8Matmuls') else ''}"
    load = r["machine"].get("load_average") if "machine" in r else None
    shared = (f"; 1-minute load average {load[0]:.1f} on {r['machine'].get('cpus')} CPUs as it finished, its own "
              "server and client included" if load else "")
    return [f"**End to end** ({where}`{r['command']}`, server in {dtype} with {compiled}{threads}{shared}): held-out "
            f"function bodies typed key by key through `spanfill serve` over stdio, one key every "
            f"{r['config']['interval_ms']:.0f} ms, automatic requests with `$/cancelRequest` of the outstanding one. "
            "*Keystroke to suggestion*: from a keystroke to the first answer shown for it or for a later keystroke "
            "(a keystroke whose request the next one cancelled waits on); *round trip*: the answered requests alone, "
            "as the client sees them:", "",
            table(["what", "count", "p50 ms", "p95 ms", "p99 ms"], rows), "",
            unanswered_sentence(r, wait)
            + f" {req['sent']} sent, {req['answered']} answered, {req['cancelled']} cancelled, {req['failed']} failed; "
            f"{pct(r['typing_through']['share_answered_from_cache'] or 0)} answered from the typing-through cache; "
            + (f"context-token reuse {pct(reuse)}; " if reuse is not None else "")
            + f"superseded in the server: {server.get('superseded', 'n/a')}."
            + stages_sentence(server)]


def unanswered_sentence(r: dict, wait: dict | None) -> str:
    keys, req = r.get("keystrokes"), r["requests"]
    if keys:
        missed = keys["count"] - keys["answered_before_next_key"]
        return (f"{missed} of {keys['count']} keystrokes ({pct(keys['share_unanswered_before_next_key'])}) got no "
                f"answer before the next key: {keys['waited_for_a_later_key']} waited for a later keystroke's, "
                f"{keys['never_shown']} for none; {keys['ended_on_an_empty_answer']} waits ended on an empty answer "
                "(no ghost text).")
    if wait:
        return ("Every keystroke was answered before the next one, so each wait is its own round trip (this run "
                "recorded round trips only).")
    return (f"This run recorded the round trips of answered requests alone: the {req['cancelled']} keystrokes "
            f"({pct(req['cancelled'] / req['sent'])}) whose request the next key cancelled are not in the table, and "
            "keystroke to suggestion is unknown; rerun benchmarks/replay.py for it.")


def stages_sentence(server: dict) -> str:
    """Where an engine-answered request's time went, as the server measured it (median per stage)."""
    stages, engine = server.get("engineStagesMs") or {}, server.get("engineMs") or {}
    parts = [f"{name} {ms(d['p50'])}" for name, d in stages.items() if "p50" in d]
    if not parts or "p50" not in engine:
        return ""
    return (f" Inside the server, an engine call took {ms(engine['p50'])} ms at the median; per stage (medians, ms): "
            + ", ".join(parts) + ".")


REPLAY_VARIANTS = ("replay", "replay_threads2", "replay_busy", "replay_busy_threads2")


def threads_section(runs: dict[str, dict], where: str = "") -> list[str]:
    """The replay with the server's CPU threads and the machine's other load varied."""
    def at(d: dict, q: str) -> str:
        return ms(d[q]) if q in d else "–"

    def waited(r: dict, q: str) -> str:
        wait = keystroke_waits(r)
        return wait_ms(wait[q]) if wait else "not recorded"

    rows = []
    for r in runs.values():
        eng, srv = r["latency_ms_by_source"]["engine"], r["server"].get("engineMs") or {}
        req = r["requests"]
        rows.append([r.get("threads"), r["config"].get("background_load", 0), waited(r, "p50"), waited(r, "p95"),
                     f"{req['answered']} / {req['sent']}", at(eng, "p50"), at(eng, "p95"), at(eng, "p99"), at(srv, "p99")])
    return [f"**Server threads on a busy machine** ({where}the replay above with `--threads N` and "
            "`--background-load K`: K other processes spinning on the CPU while typing; one run each; "
            "`benchmarks/cpu.sh` runs all four):", "",
            table(["server threads", "busy processes", "keystroke to suggestion p50 ms", "p95 ms",
                   "answered before the next key / sent", "engine-answered round trip p50 ms", "p95 ms", "p99 ms",
                   "engine call p99 ms (server)"], rows)]


def gpu_section(r: dict, where: str = "") -> list[str]:
    rows = [[x["span_length"], "AR" if x["mode"] == "ar" else f"T={x['steps']}", x.get("path", "-"),
             ms(x["median_ms"]), ms(x["p95_ms"]), x.get("steps_run", "-"), x.get("speedup_vs_ar", "-")]
            for x in r.get("engine_rows", [])]
    kernels = [[x["op"], x["rows"], x["vocab"], x["us_per_call"]] for x in r.get("kernel_rows", [])]
    return [f"**GPU latency** ({where}{r.get('model')} model, {engine_line(r.get('engine', {}))}; "
            "`bash benchmarks/gpu.sh`, which runs `benchmarks/gpu_sweep.py`):", "",
            table(["L", "decoding", "path", "median ms", "p95 ms", "steps run", "vs AR"], rows), "",
            table(["op", "rows", "vocabulary", "µs per call"], kernels)]


def goals_section(directory: Path, where: str) -> list[str]:
    """The project's latency and quality goals against this directory's results, where they measure them."""
    ev, sweep, replay, limit = (load(directory, n) for n in ("eval", "engine_sweep", "replay", "limit"))
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
    if replay and "goals_ms" in replay:
        g, wait, req = replay["goals_ms"], keystroke_waits(replay), replay["requests"]
        goal = f"keystroke to suggestion p50 < {g['p50']} ms, p95 < {g['p95']} ms"
        if wait:
            rows.append([goal, f"p50 {wait_ms(wait['p50'])}, p95 {wait_ms(wait['p95'])} ms over {wait['count']} "
                               f"keystrokes, {req['sent'] - req['answered']} of them unanswered before the next key (replay)",
                         met(all(wait[q] is not None and wait[q] < g[q] for q in ("p50", "p95")))])
        else:
            lat = replay["latency_ms"]
            rows.append([goal, f"not recorded; the answered requests alone: p50 {ms(lat['p50'])}, p95 {ms(lat['p95'])} ms "
                               f"({req['answered']} of {req['sent']}, {req['cancelled']} cancelled left out; replay)",
                         "not judged"])
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


def families_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/families.py: public checkpoints' real shapes with random weights (latency only)."""
    out = []
    for s in r["shapes"]:
        rows = [[x["what"], x.get("tokens", "-"), ms(x["median_ms"]), ms(x["p95_ms"]), x.get("forward_passes", "-"),
                 x.get("tokens_per_s", "-")] for x in s["rows"]]
        threads = r["machine"].get("threads")
        out += [f"**{s['shape']} shape, random weights** ({where}{s['params'] / 1e6:.0f}M parameters, {s['dtype']} on "
                f"{s['device']}, {threads} thread{'' if threads == 1 else 's'}, context {s['context_tokens']} tokens, "
                f"L={s['span_length']}; `{r['command']}`):", "",
                table(["what", "tokens", "median ms", "p95 ms", "forward passes", "tokens/s"], rows), ""]
    return out[:-1]


def length_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/length.py: how each length strategy decides where the middle ends."""
    order = {"single": 0, "multi": 1}
    rows = [[x["kind"] + "-line", "AR" if x["mode"] == "ar" else x["length"], x["tasks"], pct(x["shown_exact_match"]),
             f"{x['shown_edit_similarity']:.3f}", f"{x['shown_chars_mean']:.1f} ({x['reference_chars_mean']:.1f})",
             ms(x["latency_median_ms"])]
            for x in sorted(r["rows"], key=lambda x: (order[x["kind"]], x["mode"] == "ar"))]
    return [f"**Length strategies** ({where}`{r['command']}`; {engine_line(r['engine'])}, T={r['steps']}; the default "
            f"is `{r['default_length']}`): the strategies and AR mode alternating task by task in one process; what "
            f"an editor shows, and its length beside the reference's:", "",
            table(["task", "length", "tasks", "exact match (shown)", "edit sim. (shown)", "chars shown (reference)",
                   "median ms"], rows)]


def train_throughput_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/train_throughput.py: training tokens/s and model FLOP utilisation per setting."""
    rows = [[x["setting"], x["batch"], f"{x['tokens_per_s']:.0f}", f"{100 * x['padding']:.0f}%",
             f"{100 * x['mfu']:.0f}%", f"{x['speedup_vs_before']:.2f}x"] for x in r["rows"]]
    peak = ", ".join(f"{k} {v:.2f}" for k, v in r["matmul_peak_tflops"].items())
    return [f"**Training throughput** ({where}`{r['command']}`; `{r['preset']}` preset, {r['params'] / 1e6:.1f}M "
            f"parameters, settings alternating in one process): tokens/s and model FLOPs as a share of a plain "
            f"matmul's rate in the same process (TFLOP/s: {peak}):", "",
            table(["setting", "batch", "tokens/s", "padding", "of matmul peak", "vs before"], rows)]


SECTIONS = (("eval", eval_section), ("engine_sweep", sweep_section), ("engine_micro_model", micro_section),
            ("limit", limit_section), ("span_cut", span_cut_section), ("int8", int8_section),
            ("replay", replay_section), ("gpu_latency", gpu_section), ("families", families_section),
            ("families_cuda", families_section), ("length", length_section),
            ("train_throughput", train_throughput_section))


def machine(directory: Path) -> tuple[str, str]:
    """(short name, full line) of the machine a directory's results come from, as the benchmarks recorded it."""
    reports = [r for name in ("limit", "engine_micro_model", "engine_sweep", "replay", "int8", "span_cut", "gpu_latency",
                              "families", "families_cuda", "length", "train_throughput")
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
    goals = goals_section(directory, f"{days[-1]}, {short}; ")
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
| `benchmarks/limit.py` | per-step time against the weight-streaming and FLOP bounds of this machine |
| `benchmarks/span_cut.py` | the span cut to 16 positions (default) against the whole span, alternating in one process |
| `benchmarks/int8.py` | fp32 against int8 matmuls (`dtype` `int8`), two engines alternating in one process |
| `benchmarks/gpu_sweep.py` | on CUDA: L × T through CUDA graphs and eagerly, AR, the Triton confidence kernel |

```sh
DATA=/path/to/data bash benchmarks/cpu.sh      # all CPU benchmarks on the shipped model, then this file
RESULTS=benchmarks/results/NAME DATA=... bash benchmarks/cpu.sh   # another machine's results beside these
bash benchmarks/gpu.sh                          # on a CUDA machine: kernel and CUDA-graph tests, then gpu_sweep.py
python benchmarks/report.py                     # this file, from what is under benchmarks/results/
```

`DATA` is what `spanfill data` writes (cpu.sh builds it when missing); its held-out files were never
trained on. `MODEL=DIR` benchmarks another checkpoint. cpu.sh takes about 30 minutes on a 2-core
machine; run it on an otherwise idle one, since every benchmark times what runs beside it. gpu.sh writes
to `benchmarks/results/gpu/` (or `$OUT`).

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
