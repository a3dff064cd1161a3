"""One scorer for every quality and latency measurement: held-out tasks, a completion scored raw
and as an editor shows it, and one percentile definition (nearest rank) that `spanfill/status` and
every benchmark share, so a p95 means the same thing everywhere.

    tasks = build_tasks(read_split(data / "held_out.jsonl"), 300, 150, engine.tokenizer, L)
    scores = [score(engine, task, steps=4) for task in tasks]
    row = summarise(scores)     # latency_median_ms, latency_p95_ms, exact_match, ... (means)
"""
from __future__ import annotations

import hashlib
import math
import random
import statistics
import time
from dataclasses import asdict, dataclass

from ..api import CompletionRequest
from ..decoding.postprocess import Cursor, Shown, finish
from ..training.samples import cut_line_rest, cut_line_start, cut_lines


@dataclass
class Task:
    task_id: str
    kind: str            # "single": rest of a line; "multi": 2-3 whole lines; "line": one whole line with its
                         # break, the cursor at column 0 of the line that follows (line-level infilling)
    prefix: str
    middle: str          # the reference completion
    suffix: str


@dataclass
class Score:
    """One completion of one task. Field names are those of `summarise`'s means, without `_mean`
    where they are rates."""
    latency_ms: float
    forward_passes: int
    exact_match: bool
    edit_similarity: float
    shown_exact_match: bool          # after the editor-side post-processing (postprocess.py)
    shown_edit_similarity: float
    shown_chars: int                 # how long what the editor shows is, beside the reference: a model
    reference_chars: int             # that ends too early (or runs on) shows here before it shows in EM
    text: str = ""


def build_tasks(files, n_single: int, n_multi: int, tokenizer, span_length: int, n_line: int = 0) -> list[Task]:
    """Deterministic infill tasks with the training cursor cutters (training/samples.py): single-line =
    rest of a line, multi-line = 2-3 whole lines, line = one whole line inserted at column 0 of a line
    with code; only middles that fit one span (L-1 tokens + eom). Each kind's tasks do not depend on
    the other kinds' counts."""
    tasks: list[Task] = []
    for kind, wanted in (("single", n_single), ("multi", n_multi), ("line", n_line)):
        made = 0
        for f in sorted(files, key=lambda f: hashlib.sha1(f.path.encode()).hexdigest()):
            if made >= wanted:
                break
            rng = random.Random(f"{kind}:{f.path}")
            for _ in range(max(1, wanted // max(1, len(files)) + 1)):
                cut = _cut(kind, f.text, rng)
                if cut is None or not cut.middle.strip() or (kind == "multi" and "\n" not in cut.middle):
                    continue
                if len(tokenizer.encode(cut.middle)) >= span_length:
                    continue
                tasks.append(Task(f"{kind}/{f.path}#{made}", kind, cut.prefix, cut.middle, cut.suffix))
                made += 1
                if made >= wanted:
                    break
    return tasks


def _cut(kind: str, text: str, rng: random.Random):
    """A task's cut of `text` (None: none of that kind here)."""
    if kind == "single":
        return cut_line_rest(text, rng)
    if kind == "multi":
        return cut_lines(text, rng, max_lines=3)
    cut = cut_line_start(text, rng, max_lines=1)
    # the line must move below code: at column 0 of a blank line (or the file's end) the cursor is multi-line
    return cut if cut is not None and cut.suffix.split("\n", 1)[0].strip() else None


def levenshtein(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def edit_similarity(a: str, b: str) -> float:
    if not a and not b:
        return 1.0
    return 1.0 - levenshtein(a, b) / max(len(a), len(b))


def exact(completion: str, middle: str) -> bool:
    return completion.rstrip() == middle.rstrip()


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with at least q% of the values at or below it."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = math.ceil(round(q / 100 * len(ordered), 9))   # round: 0.95 * 20 is 19.000000000000004
    return ordered[max(0, min(len(ordered), rank) - 1)]


def warm(engine, task: Task) -> None:
    """Encode the task's context into the engine's KV cache, as typing up to the cursor would."""
    engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, steps=1))


def score(engine, task: Task, fallback: bool = False, **request) -> Score:
    """Complete `task` with `CompletionRequest(**request)` and score its first candidate; the
    latency is the whole `complete` call. fallback: AR decodes again when the editor would show none
    of diffusion's candidates (`Shown.would_show`: at a multi-line cursor, enough of one), as the server
    asks."""
    shown = Shown(Cursor(task.prefix, task.suffix), python=True)   # held-out tasks are Python files
    if fallback:
        request["would_show"] = shown.would_show
    t0 = time.perf_counter()
    result = engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, **request))
    return score_text(task, result.texts[0], (time.perf_counter() - t0) * 1e3, result.forward_passes,
                      lambda raw, _cursor: shown.text(raw))


def score_text(task: Task, text: str, latency_ms: float, forward_passes: int, show=None) -> Score:
    """Score a completion however it was made (the engine, or another model as a baseline). show(raw,
    cursor) -> shown text or None: the post-processing scored (default: the server's, of a Python file)."""
    cursor = Cursor(task.prefix, task.suffix)
    shown = (show(text, cursor) if show else finish(text, cursor, python=True)) or ""   # held-out tasks are Python files
    middle = task.middle.rstrip()
    return Score(latency_ms, forward_passes, exact(text, task.middle), edit_similarity(text.rstrip(), middle),
                 exact(shown, task.middle), edit_similarity(shown.rstrip(), middle),
                 len(shown.rstrip()), len(middle), text)


def summarise(scores: list[Score]) -> dict:
    """A result row: task count, latency median, p95 and mean (the time per completion over the tasks:
    a decoder with a long tail can win the median and lose the mean), and the mean of every score."""
    lat = [s.latency_ms for s in scores]
    rows = [asdict(s) for s in scores]
    means = {"forward_passes_mean": "forward_passes", "exact_match": "exact_match",
             "edit_similarity": "edit_similarity", "shown_exact_match": "shown_exact_match",
             "shown_edit_similarity": "shown_edit_similarity", "shown_chars_mean": "shown_chars",
             "reference_chars_mean": "reference_chars"}
    return {"tasks": len(scores), "latency_median_ms": statistics.median(lat), "latency_p95_ms": percentile(lat, 95),
            "latency_mean_ms": statistics.fmean(lat), **{name: sum(r[key] for r in rows) / len(rows) for name, key in means.items()}}


def decoding_label(row: dict) -> str:
    """'AR', 'diffusion T=4', 'diffusion T=4, fixed rule', 'diffusion T=4, AR fallback' or 'diffusion,
    default T, AR check, AR fallback' for a result row: the default rule goes unnamed, and so do rows
    that record no rule; steps None is the request's default T; the check is named with its acceptance
    unless it is the default ("auto")."""
    if row["mode"] == "ar":
        return "AR"
    rule, check = row.get("rule", "content"), row.get("check")
    return (("diffusion, default T" if row["steps"] is None else f"diffusion T={row['steps']}")
            + ("" if rule == "content" else f", {rule} rule")
            + ("" if check is None else ", AR check" + ("" if check == "auto" else f" {check}"))
            + (", AR fallback" if row.get("fallback") else ""))
