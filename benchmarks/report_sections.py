"""The engine and model benchmarks' sections of benchmarks/README.md, one function per result file:
each takes the file's report and where it comes from (date and machine), and returns its lines."""
from __future__ import annotations

from report_format import engine_line, ms, paired, pct, shown, speed, table

from spanfill.engine import decoding_label   # the label `spanfill eval` prints


def by_kind(report: dict) -> dict:
    return {(r["kind"], decoding_label(r)): r for r in report["results"]}


def eval_section(report: dict, where: str = "") -> list[str]:
    rows = []
    for r in sorted(report["results"], key=lambda r: (r["kind"] != "single", r["mode"] == "ar", r.get("rule", ""),
                                                     r["steps"] or 0)):
        rows.append([f"{r['kind']}-line", decoding_label(r), r["tasks"],
                     pct(r["exact_match"]), f"{r['edit_similarity']:.3f}", shown(r, "shown_exact_match", pct),
                     shown(r, "shown_edit_similarity", "{:.3f}".format), ms(r["latency_median_ms"]),
                     ms(r["latency_p95_ms"]), shown(r, "latency_mean_ms", ms), f"{r['forward_passes_mean']:.1f}",
                     shown(r, "shown_chars_mean", "{:.1f}".format), shown(r, "reference_chars_mean", "{:.1f}".format)])
    out = [f"**Held-out quality and latency** ({where}{engine_line(report['model'])}; `{report['command']}`). "
           "*raw*: the engine's middle; *shown*: after the server's post-processing, what an editor shows:", "",
           table(["task", "decoding", "tasks", "exact match (raw)", "edit sim. (raw)", "exact match (shown)",
                  "edit sim. (shown)", "p50 ms", "p95 ms", "mean ms", "forward passes", "chars shown", "chars in reference"], rows)]
    by = by_kind(report)
    for kind, score, fmt in (("single", "exact_match", pct), ("multi", "edit_similarity", "{:.3f}".format)):
        ar = by.get((kind, "AR"))
        for steps in (4, 8):    # the goals' T, and T=8 (one token per pass on most single lines) beside it
            d = by.get((kind, f"diffusion T={steps}"))
            if d and ar:
                name = score.replace("_", " ")
                mean = (f" (mean {ms(d['latency_mean_ms'])} vs. {ms(ar['latency_mean_ms'])} ms: "
                        f"{speed(ar['latency_mean_ms'], d['latency_mean_ms'])})" if "latency_mean_ms" in d else "")
                out += ["", f"{kind.capitalize()}-line, T={steps} vs. AR of the same weights: {name} {fmt(d[score])} vs. "
                            f"{fmt(ar[score])} raw, {shown(d, 'shown_' + score, fmt)} vs. "
                            f"{shown(ar, 'shown_' + score, fmt)} shown, median latency {ms(d['latency_median_ms'])} vs. "
                            f"{ms(ar['latency_median_ms'])} ms: **{speed(ar['latency_median_ms'], d['latency_median_ms'])}**"
                            f"{mean}."]
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
    order = {"whole": 0, "cut": 1, "default": 2}
    shown_em = "shown_exact_match" in r["rows"][0]    # older files have raw scores only
    rows = [[x["kind"] + "-line", x["setting"], x["tasks"], pct(x["shown_exact_match" if shown_em else "exact_match"]),
             f"{x['shown_edit_similarity' if shown_em else 'edit_similarity']:.3f}", ms(x["latency_median_ms"]),
             ms(x["latency_p95_ms"]), f"{x['forward_passes_mean']:.2f}"]
            for x in sorted(r["rows"], key=lambda x: (x["kind"] != "single", order.get(x["setting"], 3)))]
    by = {(x["kind"], x["setting"]): x["latency_median_ms"] for x in r["rows"]}
    gains = "; ".join(f"{setting}: " + ", ".join(f"{kind}-line {speed(by[kind, 'whole'], by[kind, setting])}"
                                                   for kind in ("single", "multi") if (kind, setting) in by and (kind, "whole") in by)
                      for setting in ("cut", "default") if any((k, setting) in by for k in ("single", "multi")))
    start = (f"; *default*, what a request that names no span runs, starts a single-line cursor on "
             f"{r['single_line_span']} positions and cuts it as *cut* does" if "single_line_span" in r else "")
    return [f"**Span cut** ({where}`{r.get('command', 'python benchmarks/span_cut.py')}`; {engine_line(r['engine'])}, "
            f"T={r['steps']}): the span cut to {', '.join(map(str, r['cut_to']))} once its tail is committed pads "
            f"(*cut*) against the whole span for every step (*whole*){start}; settings alternate task by task in one "
            f"process; median against *whole*: {gains}:", "",
            table(["task", "span", "tasks", "exact match" + (" (shown)" if shown_em else ""), "edit sim.", "median ms",
                   "p95 ms", "forward passes"], rows)]


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


def tokenize_time_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/tokenize_time.py: what tokenizing costs a keystroke, with and without the line-piece memo."""
    fine = "{:.3f}".format     # fractions of a millisecond: the two decimals of ms() would round them away
    rows = [[x["setting"], *(fine(x[stage][q]) for stage in ("window", "tokenize", "total") for q in ("median_ms", "p95_ms"))]
            for x in r["rows"]]
    b = r["budget"]
    return [f"**Tokenize time per keystroke** ({where}`{r['command']}`; {engine_line(r['engine'])}): {r['keystrokes']} "
            f"keystrokes retyping lines of a {r['lines']}-line held-out file (`{r['file']}`), prefix window "
            f"{r['prefix_tokens_median']:.0f} tokens at the median (budget: prefix {b['prefix_tokens']}, suffix "
            f"{b['suffix_tokens']}, snippets {b['snippet_tokens']}). *pieces*: the server builds its context windows "
            "from the tokenizer's line-piece memo and sends their ids with the request, so the engine encodes no "
            "window; *whole*: every window encoded whole by the server to check its budget, and again by the engine. "
            "The two alternate keystroke by keystroke in one process and give the engine the same context; "
            "*window*: the server building its windows; *tokenize*: the engine's tokenize stage (token healing "
            f"included); whole over pieces, total at the median: **{r['whole_over_pieces']}x**:", "",
            table(["setting", "window p50 ms", "p95 ms", "engine tokenize p50 ms", "p95 ms", "total p50 ms", "p95 ms"],
                  rows)]


def gpu_section(r: dict, where: str = "") -> list[str]:
    rows = [[x["span_length"], "AR" if x["mode"] == "ar" else f"T={x['steps']}", x.get("path", "-"),
             ms(x["median_ms"]), ms(x["p95_ms"]), x.get("steps_run", "-"), x.get("speedup_vs_ar", "-")]
            for x in r.get("engine_rows", [])]
    kernels = [[x["op"], x["rows"], x["vocab"], x["us_per_call"]] for x in r.get("kernel_rows", [])]
    return [f"**GPU latency** ({where}{r.get('model')} model, {engine_line(r.get('engine', {}))}; "
            "`bash benchmarks/gpu.sh`, which runs `benchmarks/gpu_sweep.py`):", "",
            table(["L", "decoding", "path", "median ms", "p95 ms", "steps run", "vs AR"], rows), "",
            table(["op", "rows", "vocabulary", "µs per call"], kernels)]


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


def _multiline_table(r: dict, key: str, first: float, label) -> str:
    """The rows of benchmarks/common.py compare_multiline: each setting per split and over all; `first`
    is the setting the others are paired with."""
    rows = [[x["split"], "AR" if x["mode"] == "ar" else label(x[key]), x["tasks"], pct(x["shown_exact_match"]),
             f"{x['shown_edit_similarity']:.3f}", paired(None if x["mode"] != "ar" and x[key] == first else x["vs_first"]),
             paired(None if x["mode"] == "ar" else x["vs_ar"]),
             f"{x['shown_chars_mean']:.1f} ({x['reference_chars_mean']:.1f})", ms(x["latency_median_ms"])]
            for x in r["rows"]]
    return table(["split", key, "tasks", "exact match (shown)", "edit sim. (shown)", f"vs {label(first)}", "vs AR",
                  "chars shown (reference)", "median ms"], rows)


def head_quantile_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/head_quantile.py: where the length head ends a multi-line span, as the server asks."""
    return [f"**Length head's quantile** ({where}`{r['command']}`; {engine_line(r['engine'])}, T={r['steps']}): "
            f"held-out multi-line tasks completed as the server asks (AR fallback) with the span's end at each quantile "
            f"of the length head's count distribution, and AR mode, alternating task by task; *vs*: exact matches won / "
            f"lost and the edit-similarity difference ± its standard error against the first quantile and against AR, "
            f"task by task; *all*: every split's tasks together:", "",
            _multiline_table(r, "quantile", r["quantiles"][0], lambda q: f"{q:g}")]


def span_lengths_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/span_lengths.py: the lengths a span is cut down to, as the server asks."""
    return [f"**Span cut lengths** ({where}`{r['command']}`; {engine_line(r['engine'])}, T={r['steps']}): held-out "
            f"multi-line tasks completed as the server asks (the length head's end, AR fallback) with the span cut "
            f"down to each set of lengths once its tail is committed pads (none: the whole span at every step), and "
            f"AR mode, alternating task by task on one engine; *vs*: exact matches won / lost and the edit-similarity "
            f"difference ± its standard error against the first set and against AR, task by task; *all*: every "
            f"split's tasks together:", "", _multiline_table(r, "cut", r["cuts"][0], cut_label)]


def cut_label(cut: list[int]) -> str:
    return ",".join(map(str, cut)) or "none"


def fallback_share_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/fallback_share.py: the share of a multi-line candidate that must show, or AR decodes again."""
    fell = ", ".join(f"{float(s):g}: {n}" for s, n in r["fell_back"].items())
    return [f"**AR fallback at a multi-line cursor** ({where}`{r['command']}`; {engine_line(r['engine'])}): held-out "
            f"multi-line tasks completed as the server asks, where AR decodes again unless the editor would show at "
            f"least a share of diffusion's text (0: anything), and AR mode, alternating task by task; *vs*: exact "
            f"matches won / lost and the edit-similarity difference ± its standard error against the first share and "
            f"against AR, task by task; *all*: every split's tasks together. Requests that fell back, per share: "
            f"{fell}:", "", _multiline_table(r, "share", r["shares"][0], lambda s: f"{s:g}")]


def line_start_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/line_start.py: a whole line written at column 0 of the line below it, under two line policies."""
    rows = [["AR" if x["mode"] == "ar" else "diffusion (server defaults, AR fallback)", x["policy"], x["tasks"],
             pct(x["shown_exact_match"]), pct(x["file_exact"]), f"{x['shown_edit_similarity']:.3f}",
             f"{x['shown_chars_mean']:.1f} ({x['reference_chars_mean']:.1f})", ms(x["latency_median_ms"]),
             paired(x.get("vs_first_line"))] for x in r["rows"]]
    return [f"**Line-level infilling** ({where}`{r['command']}`; {engine_line(r['engine'])}): one whole held-out line "
            f"written at column 0 of the line below it; *whole lines* is what the server shows there (the line with "
            f"its break), *first line* the single-line policy alone (no break: it joins the line below); *file*: "
            f"prefix + shown + suffix is the file itself; *vs*: exact matches won / lost and the edit-similarity "
            f"difference ± its standard error against the same decoding under *first line*, task by task:", "",
            table(["decoding", "policy", "tasks", "exact match (shown)", "file", "edit sim. (shown)",
                   "chars shown (reference)", "median ms", "vs first line"], rows)]


def windows_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/windows.py: the prefix and suffix windows cut to shares of the budget, paired task by task."""
    last = r["shares"][-1]

    rows = [[x["kind"] + "-line", f"{x['share']:.0%}", f"{x['context_tokens_mean']:.0f}", x["tasks"],
             pct(x["shown_exact_match"]), f"{x['shown_edit_similarity']:.3f}", paired(x.get("against_last"))]
            for x in sorted(r["rows"], key=lambda x: (x["kind"] != "single", x["share"]))]
    b, w = r["budget"], r.get("server_windows")
    held = (f" The server holds a window between {w['low']:.0%} and 100% of the budget and recuts it to {w['target']:.0%}"
            f" (server/context.py)" if w else "")
    weights = f", {r['weights']}" if "weights" in r else ""
    return [f"**Context windows** ({where}`{r['command']}`; {engine_line(r['engine'])}{weights}): the prefix and suffix windows "
            f"cut on line boundaries to a share of the budget ({b['prefix_tokens']} and {b['suffix_tokens']} tokens), "
            f"completed as the server asks; *context*: tokens in the context, mean; *vs {last:.0%}*: what the "
            f"{last:.0%} windows won / lost in exact match and their edit-similarity difference ± its standard error, "
            f"task by task (quality only: each task's full context is cached first, so the smaller windows' latency would include a prefill).{held}:",
            "", table(["task", "windows", "context", "tasks", "exact match (shown)", "edit sim. (shown)", f"vs {last:.0%}"],
                      rows)]


def check_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/check.py: the AR check of diffusion's draft at several acceptances, paired task by task."""
    order = {"single": 0, "multi": 1}

    def name(x: dict) -> str:     # "0.03:2:8": acceptance 0.03 on a draft of 2 steps (T otherwise the run's), L=8
        acceptance, steps, span = (x["setting"].split(":") + ["", ""])[:3]
        label = {"ar": "AR", "none": "draft unchecked", "auto": "the default (`auto`)"}.get(acceptance, f"check {acceptance}")
        return label + (f", T={steps}" if steps else "") + (f", L={span}" if span else "")
    rows = [[x["kind"] + "-line", name(x), x["tasks"], pct(x["shown_exact_match"]),
             f"{x['shown_edit_similarity']:.3f}", f"{x['shown_chars_mean']:.1f} ({x['reference_chars_mean']:.1f})",
             f"{x['kept_tokens_mean']:.1f}", ms(x["latency_median_ms"]), f"{x['forward_passes_mean']:.1f}",
             paired(x.get("vs_unchecked")), paired(x.get("vs_ar"))]
            for x in sorted(r["rows"], key=lambda x: (order[x["kind"]], x["setting"] == "ar"))]
    return [f"**AR check of the draft** ({where}`{r['command']}`; {engine_line(r['engine'])}, T={r['steps']} unless a row names its own, the AR "
            f"fallback on, as the server asks): each acceptance, the draft unchecked and AR mode alternating task by task "
            f"in one process; what an editor shows; *kept*: the draft's tokens the check kept; *vs*: exact matches won / "
            f"lost and the edit-similarity difference ± its standard error, task by task:", "",
            table(["task", "decoding", "tasks", "exact match (shown)", "edit sim. (shown)", "chars shown (reference)",
                   "kept", "median ms", "forward passes", "vs the draft unchecked", "vs AR"], rows)]


def train_throughput_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/train_throughput.py: training tokens/s and model FLOP utilisation per setting."""
    rows = [[x["setting"], x["batch"], x.get("attention", "sdpa"), x.get("logits", "dense"), f"{x['tokens_per_s']:.0f}",
             f"{100 * x['padding']:.0f}%", f"{100 * x['mfu']:.0f}%", f"{x['speedup_vs_before']:.2f}x"] for x in r["rows"]]
    peak = ", ".join(f"{k} {v:.2f}" for k, v in r["matmul_peak_tflops"].items())
    return [f"**Training throughput** ({where}`{r['command']}`; `{r['preset']}` preset, {r['params'] / 1e6:.1f}M "
            f"parameters, settings alternating in one process): tokens/s and model FLOPs as a share of a plain "
            f"matmul's rate in the same process (TFLOP/s: {peak}):", "",
            table(["setting", "batch", "attention", "logits", "tokens/s", "padding", "of matmul peak", "vs before"], rows)]


SOAK_CASES = (("many_documents", "many documents open at once"), ("big_document", "one large document"),
              ("single_line", "one long single line"))


def soak_section(r: dict, where: str = "") -> list[str]:
    """benchmarks/soak.py: the server's memory and round trips over a long typing run with document
    churn, then what it holds under many, large and single-line documents."""
    c, d, req, lat = r["config"], r["drift"], r["requests"], r["latency_ms"]
    opt = lambda x, fmt=ms: "-" if x is None else fmt(x)   # noqa: E731  (None: soak.py had nothing to measure it on)
    mb = "{:.1f}".format
    threads = f", {r['threads']} thread{'s' if r['threads'] != 1 else ''}" if r.get("threads") else ""
    compiled = "compiled CPU steps" if r.get("compiled") else "eager"
    drift_rows = [["server RSS MB, first warm sample and last", mb(d["rss_mb_warm_first"]), mb(d["rss_mb_last"])],
                  ["round trip p50 ms, first and last third", opt(d["p50_ms_first_third"]), opt(d["p50_ms_last_third"])],
                  ["round trip p95 ms, first and last third", opt(d["p95_ms_first_third"]), opt(d["p95_ms_last_third"])]]
    slope = opt(d["rss_slope_mb_per_hour"], mb)
    bounded = r["bounded"]
    case_rows = [[label, b["documents"], mb(b["chars"] / 2**20), mb(b["rss_mb_before"]), mb(b["rss_mb_open"]),
                  mb(b["rss_mb_after_requests"]), mb(b["rss_mb_after_close"]), f"{b['answered']} / {b['requests']}",
                  opt(b["latency_ms"].get("p50")), opt(b["latency_ms"].get("max"))]
                 for key, label in SOAK_CASES if (b := bounded.get(key))]
    return [f"**Soak** ({where}`{r['command']}`, server in {r.get('dtype')} with {compiled}{threads}): "
            f"{r['seconds'] / 60:.0f} minutes of held-out function bodies typed key by key as in the replay, one key "
            f"every {c['interval_ms']:.0f} ms ({r['bodies_typed']} bodies), while every {c['churn_s']:.0f} s "
            f"{c['churn_docs']} other held-out files were opened and the oldest closed beyond {c['max_open']}; "
            f"`spanfill/status` sampled every {c['sample_s']:.0f} s ({len(r['samples'])} samples). Warm from "
            f"{d['warm_from_s']:.0f} s on; the thirds are of the warm run, each figure the median of its sample "
            "windows' round trips (answered requests):", "",
            table(["what", "first", "last"], drift_rows), "",
            f"Once warm, RSS grew {d['rss_growth_mb']:.1f} MB (at most {mb(d['rss_mb_max'])} MB; fitted slope "
            f"**{slope} MB per hour**). {req['sent']} requests sent, {req['answered']} answered, {req['cancelled']} "
            f"cancelled, **{req['failed']} failed**; round trip over the whole run p50 {ms(lat['p50'])}, p95 "
            f"{ms(lat['p95'])}, p99 {ms(lat['p99'])}, max {ms(lat['max'])} ms.", "",
            "Bounded resources, on the same server afterwards: each case opened, asked at a few places, closed; "
            f"RSS at the end {mb(bounded['rss_mb_end'])} MB:", "",
            table(["case", "documents", "text MB", "RSS before MB", "open", "after requests", "after close",
                   "answered / asked", "p50 ms", "max ms"], case_rows)]
