"""Render the README's benchmark tables from what the benchmarks wrote to benchmarks/results/ (or to
$SPANFILL_RESULTS, as the benchmarks do).

    python benchmarks/report.py            # prints Markdown; benchmarks/cpu.sh runs it last

Reads eval.json (`spanfill eval`), engine_sweep.json, engine_micro_model.json, limit.json,
span_cut.json, int8.json and replay.json (and the replay's thread/load variants, replay_*.json); a missing file leaves its table
out. Nothing here measures anything: every number is copied from a result file, with the command
that wrote it.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from spanfill.engine.evaluate import decoding_label

RESULTS = Path(os.environ.get("SPANFILL_RESULTS") or Path(__file__).parent / "results")   # as common.py


def load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def ms(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def engine_line(info: dict) -> str:
    steps = "compiled steps" if info.get("compiled") else "eager"
    int8 = " with int8 matmuls" if info.get("int8_matmuls") else ""
    return (f"{info.get('params', 0) / 1e6:.1f}M-parameter model, {info.get('dtype')}{int8} on {info.get('device')}, "
            f"{steps}, L={info.get('span_length')}")


def shown(row: dict, key: str, fmt) -> str:
    return fmt(row[key]) if key in row else "-"    # results written before the shown scores existed


def eval_section(report: dict) -> list[str]:
    rows = []
    for r in sorted(report["results"], key=lambda r: (r["kind"] != "single", r["mode"] == "ar", r.get("rule", ""),
                                                     r["steps"] or 0)):
        rows.append([f"{r['kind']}-line", decoding_label(r), r["tasks"],
                     pct(r["exact_match"]), f"{r['edit_similarity']:.3f}", shown(r, "shown_exact_match", pct),
                     shown(r, "shown_edit_similarity", "{:.3f}".format), ms(r["latency_median_ms"]),
                     ms(r["latency_p95_ms"]), f"{r['forward_passes_mean']:.1f}",
                     shown(r, "shown_chars_mean", "{:.1f}".format), shown(r, "reference_chars_mean", "{:.1f}".format)])
    out = [f"**Held-out quality and latency** ({engine_line(report['model'])}; `{report['command']}`). "
           "*raw*: the engine's middle; *shown*: after the server's post-processing, what an editor shows:", "",
           table(["task", "decoding", "tasks", "exact match (raw)", "edit sim. (raw)", "exact match (shown)",
                  "edit sim. (shown)", "p50 ms", "p95 ms", "forward passes", "chars shown", "chars in reference"], rows)]
    by = {(r["kind"], decoding_label(r)): r for r in report["results"]}
    ar = by.get(("single", "AR"))
    for steps in (4, 8):    # the goals' T, and T=8 (one token per pass on most single lines) beside it
        d = by.get(("single", f"diffusion T={steps}"))
        if d and ar:
            out += ["", f"Single-line, T={steps} vs. AR of the same weights: exact match {pct(d['exact_match'])} vs. "
                        f"{pct(ar['exact_match'])} raw, {shown(d, 'shown_exact_match', pct)} vs. "
                        f"{shown(ar, 'shown_exact_match', pct)} shown, median latency {ms(d['latency_median_ms'])} vs. "
                        f"{ms(ar['latency_median_ms'])} ms: **{ar['latency_median_ms'] / d['latency_median_ms']:.1f}x** faster."]
    return out


def sweep_section(report: dict) -> list[str]:
    rows = [[r["name"], r["kind"], ms(r["latency_median_ms"]), ms(r["latency_p95_ms"]), f"{r['tokens_per_s']:.0f}",
             pct(r["exact_match"]), f"{r['edit_similarity']:.3f}"] for r in report["rows"]]
    out = [f"**Engine sweep** ({report['tasks']} held-out single-line tasks, {engine_line(report['engine'])}; "
           f"`{report['command']}`). *warm*: the task's context is already in the KV cache, as while typing; "
           "*cold*: the context is encoded inside the timed call (the like-for-like comparison with `generate()`).", "",
           table(["decoding", "context", "p50 ms", "p95 ms", "tokens/s", "exact match", "edit sim."], rows)]
    by = {(r["name"], r["kind"]): r for r in report["rows"]}
    d4 = by.get(("diffusion L=32 T=4", "cold"))
    ar, hf = by.get(("AR L=32", "cold")), by.get(("transformers generate() L=32", "cold"))
    if d4 and ar and hf:
        out += ["", f"Cold, L=32, T=4 diffusion: {ar['latency_median_ms'] / d4['latency_median_ms']:.1f}x faster per "
                    f"completion than AR mode of the same weights and {hf['latency_median_ms'] / d4['latency_median_ms']:.1f}x "
                    f"faster than `transformers` `generate()` (median latency, one run)."]
    if report.get("generate_equals_ar") is not None:
        dtype = report["engine"].get("dtype", "")
        rest = ("" if report["generate_equals_ar"] >= 1 else
                f"; on the rest the two diverge somewhere (both run {dtype}, through different kernels)")
        out += [f"`generate()` on the Llama export wrote exactly spanfill's AR-mode text on "
                f"{pct(report['generate_equals_ar'])} of the tasks{rest}."]
    return out


def micro_section(report: dict) -> list[str]:
    rows = [[r["what"], ms(r["median_ms"]), ms(r["p95_ms"])] for r in report["rows"]]
    out = [f"**Per step and per completion** ({engine_line(report['engine'])}, context of {report['context_tokens']} "
           "tokens cached; `python benchmarks/engine_micro.py --model DEFAULT`):", "",
           table(["what", "median ms", "p95 ms"], rows)]
    seconds = report["engine"].get("compile_seconds")
    if seconds:   # written since the engine reports it
        out += ["", f"Compiling the steps (in the background, at load) took {seconds:.0f} s in this run."]
    return out


def cached_bound(r: dict) -> str:
    if "weight_read_bound_ms" not in r:   # written before the weight-sized read was measured
        return ""
    return (f"; reading them at the {r['weight_sized_read_bandwidth_gbs']:.1f} GB/s measured on a weight-sized "
            f"array (cache-resident, as the weights are between steps) takes {ms(r['weight_read_bound_ms'])} ms "
            f"(**{r['ratio_to_weight_read_bound']}x**)")


def kv_bound(r: dict) -> str:
    if "weight_and_kv_stream_bound_ms" not in r:   # written before the cached keys and values were counted
        return ""
    return (f", or {ms(r['weight_and_kv_stream_bound_ms'])} ms with the {r['kv_bytes'] / 1e6:.1f} MB of cached keys "
            f"and values its attention reads too (**{r['ratio_to_weight_and_kv_stream_bound']}x**)")


def limit_section(r: dict) -> list[str]:
    kind = "compiled" if r["engine"].get("compiled") else "eager"
    eager = f" (eager: {ms(r['eager_step']['median_ms'])} ms)" if "eager_step" in r and kind == "compiled" else ""
    return [f"**Limit** (`python benchmarks/limit.py`): one {kind} span step (L={r['span_length']}, context {r['context_tokens']}) "
            f"takes {ms(r['step']['median_ms'])} ms{eager}; streaming the {r['weight_bytes'] / 1e6:.1f} MB of weights once at the "
            f"measured {r['read_bandwidth_gbs']:.1f} GB/s DRAM read rate takes {ms(r['weight_stream_bound_ms'])} ms "
            f"(**{r['ratio_to_weight_stream_bound']}x**){kv_bound(r)}{cached_bound(r)}, and its {r['step_gflop']:.2f} GFLOP at the measured "
            f"{r['matmul_gflops']:.0f} GFLOP/s matmul rate take {ms(r['flop_bound_ms'])} ms (**{r['ratio_to_flop_bound']}x**)."
            + breakdown(r)]


def breakdown(r: dict) -> str:
    b = r.get("step_breakdown_ms")
    if not b:    # written before the step was profiled, or measured on a GPU
        return ""
    share = lambda part: f"{100 * b[part] / b['profiled_ms']:.0f}%"   # noqa: E731
    compiled = r["engine"].get("compiled")
    kernels = "its matmuls and fused C++ loops" if compiled else "its matmuls"
    other = "Dynamo's guards, wrappers and cache views" if compiled else "its other ops and their dispatch"
    return (f" Profiled (20 steps; the parts add up to {ms(b['profiled_ms'])} ms per step), the step spends "
            f"{share('kernels')} in {kernels}, {share('attention')} in attention over the cached context "
            f"(PyTorch's flash-attention kernel) and {share('other')} in {other}.")


def span_cut_section(r: dict) -> list[str]:
    rows = [[r_["kind"] + "-line", r_["setting"], r_["tasks"], pct(r_["exact_match"]), f"{r_['edit_similarity']:.3f}",
             ms(r_["latency_median_ms"]), ms(r_["latency_p95_ms"]), f"{r_['forward_passes_mean']:.2f}"]
            for r_ in sorted(r["rows"], key=lambda x: (x["kind"] != "single", x["setting"] != "whole"))]
    by = {(x["kind"], x["setting"]): x["latency_median_ms"] for x in r["rows"]}
    gains = ", ".join(f"{kind}-line {by[kind, 'whole'] / by[kind, 'cut']:.2f}x" for kind in ("single", "multi")
                      if (kind, "cut") in by and (kind, "whole") in by)
    return [f"**Span cut** (`{r.get('command', 'python benchmarks/span_cut.py')}`; {engine_line(r['engine'])}, "
            f"T={r['steps']}): the span cut to {', '.join(map(str, r['cut_to']))} once its tail is committed pads "
            f"(*cut*, the default) against the whole span for every step (*whole*), alternating task by task in one "
            f"process; median speed-up {gains}:", "",
            table(["task", "span", "tasks", "exact match", "edit sim.", "median ms", "p95 ms", "forward passes"], rows)]


def int8_section(r: dict) -> list[str]:
    order = {"single": 0, "multi": 1}
    rows = [[x["kind"] + "-line", f"T={x['steps']}" if x["mode"] == "diffusion" else "AR", x["dtype"], x["tasks"],
             pct(x["exact_match"]), pct(x["shown_exact_match"]), f"{x['edit_similarity']:.3f}",
             ms(x["latency_median_ms"]), ms(x["latency_p95_ms"])]
            for x in sorted(r["rows"], key=lambda x: (order[x["kind"]], x["mode"] == "ar", x["dtype"]))]
    by = {(x["kind"], x["mode"], x["dtype"]): x["latency_median_ms"] for x in r["rows"]}
    gains = ", ".join(f"{kind}-line {'AR' if mode == 'ar' else 'T=' + str(r['steps'])} "
                      f"{by[kind, mode, 'fp32'] / by[kind, mode, 'int8']:.2f}x"
                      for kind in ("single", "multi") for mode in ("diffusion", "ar") if (kind, mode, "int8") in by)
    compile_s = {dtype: info.get("compile_seconds") for dtype, info in r["engines"].items()}
    compiled = (f"; compile {compile_s['fp32']:.0f} s (fp32) vs {compile_s['int8']:.0f} s (int8)"
                if None not in compile_s.values() else "")
    return [f"**int8 matmuls** (`{r['command']}`; {engine_line(r['engines']['fp32'])}): the fp32 engine against "
            f"the same weights with int8 matmuls (`dtype` `int8`, the default on a CPU without fast bf16), two "
            f"engines in one process alternating task by task{compiled}; median speed-up of int8 {gains}:", "",
            table(["task", "decoding", "matmuls", "tasks", "exact match (raw)", "exact match (shown)", "edit sim.",
                   "median ms", "p95 ms"], rows)]


def replay_section(r: dict) -> list[str]:
    lat, src, req = r["latency_ms"], r["latency_ms_by_source"], r["requests"]
    server = r.get("server", {})
    rows = [["all answered", lat.get("count"), ms(lat["p50"]), ms(lat["p95"]), ms(lat["p99"])]]
    for name in ("engine", "cache"):
        if src[name].get("count"):
            rows.append([f"from the {name}", src[name]["count"], ms(src[name]["p50"]), ms(src[name]["p95"]), ms(src[name]["p99"])])
    reuse = server.get("contextReuseRate")
    compiled = {True: "compiled CPU steps", False: "eager", None: "eager"}[r.get("compiled")]
    threads = f", {r['threads']} thread{'s' if r['threads'] != 1 else ''}" if r.get("threads") else ""
    return [f"**End to end** (`{r['command']}`, server with {compiled}{threads}): held-out function bodies typed key by key through `spanfill serve` "
            f"over stdio, one key every {r['config']['interval_ms']:.0f} ms, automatic requests with `$/cancelRequest` "
            "of the outstanding one; round trip as the client sees it:", "",
            table(["requests", "count", "p50 ms", "p95 ms", "p99 ms"], rows), "",
            f"{req['sent']} sent, {req['answered']} answered, {req['cancelled']} cancelled, {req['failed']} failed; "
            f"{pct(r['typing_through']['share_answered_from_cache'] or 0)} answered from the typing-through cache; "
            + (f"context-token reuse {pct(reuse)}; " if reuse is not None else "")
            + f"superseded in the server: {server.get('superseded', 'n/a')}."
            + stages_sentence(server)]


REPLAY_VARIANTS = ("replay", "replay_threads2", "replay_busy", "replay_busy_threads2")


def threads_section(runs: dict[str, dict]) -> list[str]:
    """The replay with the server's CPU threads and the machine's other load varied."""
    def at(d: dict, q: str) -> str:
        return ms(d[q]) if q in d else "–"

    rows = []
    for r in runs.values():
        eng, srv = r["latency_ms_by_source"]["engine"], r["server"].get("engineMs") or {}
        req = r["requests"]
        rows.append([r.get("threads"), r["config"].get("background_load", 0), f"{req['answered']} / {req['sent']}",
                     req["cancelled"], at(eng, "p50"), at(eng, "p95"), at(eng, "p99"), at(srv, "p99")])
    return ["**Server threads on a busy machine** (the replay above with `--threads N` and `--background-load K`: K "
            "other processes spinning on the CPU while typing; one run each):", "",
            table(["server threads", "busy processes", "answered / sent", "cancelled", "engine-answered p50 ms",
                   "p95 ms", "p99 ms", "engine call p99 ms (server)"], rows)]


def stages_sentence(server: dict) -> str:
    """Where an engine-answered request's time went, as the server measured it (median per stage)."""
    stages, engine = server.get("engineStagesMs") or {}, server.get("engineMs") or {}
    parts = [f"{name} {ms(d['p50'])}" for name, d in stages.items() if "p50" in d]
    if not parts or "p50" not in engine:
        return ""
    return (f" Inside the server, an engine call took {ms(engine['p50'])} ms at the median; per stage (medians, ms): "
            + ", ".join(parts) + ".")


def machine_line() -> str | None:
    """Which machine the result files come from, as the benchmarks recorded it (newer files name the CPU)."""
    for name in ("limit", "engine_micro_model", "engine_sweep", "replay"):
        report = load(name)
        if report is not None and "machine" in report:
            m = report["machine"]
            cpu = m.get("cpu_model") or m.get("processor")
            bf16 = {True: ", fast bf16 (AVX-512-BF16/AMX)", False: ", no fast bf16"}.get(m.get("cpu_fast_bf16"), "")
            cpus = f", {m['cpus']} CPUs" if m.get("cpus") else ""
            return f"Measured on: {cpu}{cpus}{bf16}; torch {m.get('torch')} ({os.path.relpath(RESULTS)})"
    return None


def main() -> int:
    sections = [line] if (line := machine_line()) else []
    for name, render in (("eval", eval_section), ("engine_sweep", sweep_section), ("engine_micro_model", micro_section),
                         ("limit", limit_section), ("span_cut", span_cut_section), ("int8", int8_section),
                         ("replay", replay_section)):
        report = load(name)
        if report is not None:
            sections.append("\n".join(render(report)))
    variants = {name: r for name in REPLAY_VARIANTS if (r := load(name)) is not None}
    if len(variants) > 1:
        sections.append("\n".join(threads_section(variants)))
    print("\n\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
