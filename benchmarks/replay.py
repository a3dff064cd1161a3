"""End-to-end replay: type held-out files into the real `spanfill serve` over stdio, one character
at a time, and measure what an editor sees.

    python benchmarks/replay.py [--model DIR] [--data data/] [--files 3] [--interval-ms 60]
                                [--max-keys 800] [--seed 0] [--threads N] [--background-load K]
                                [--name replay]

A seeded pick of held-out Python files, and in each a few function bodies of 3-8 lines: each body
is cut out, the rest of the file is opened (didOpen), and the body is typed back at `--interval-ms`
per keystroke, Enter plus the next line's indentation being one keystroke (auto-indent). Every
keystroke sends an incremental didChange and an Automatic textDocument/inlineCompletion, and, as
VS Code does, first a $/cancelRequest for the previous request if it is still outstanding.

Reported: the client-side round trip (request sent -> response read) of every request answered
and not cancelled, p50/p95/p99; how many were cancelled by the next keystroke; which answers came
from the typing-through cache (the answer is exactly the rest of the previous suggestion after the
characters typed since: what the server's cache returns); how many suggestions began with the very
next keystroke (where typing through can answer next); and the server's own view from
`spanfill/status` (cache hit rate, context-token reuse, superseded/cancelled, latency percentiles).
Engine answers' latencies would include the server's debounce (`debounceMs`), since an editor
waits for it too; it is 0 by default (editors debounce before they ask), and the replay keeps it.
Writes results/<name>.json and results/<name>.png.

`--threads N` sets the server's `threads` (default: its own, one fewer than the cores);
`--background-load K` keeps K other processes busy on the CPU while typing (a build, a test run),
which shows what a busy machine does to the slow tail.
"""
from __future__ import annotations

import argparse
import ast
import asyncio
import itertools
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

sys.path.insert(0, str(Path(__file__).parent))
import common  # noqa: E402
from common import percentile, write  # noqa: E402

from spanfill.engine import read_split  # noqa: E402
from spanfill.server.headless import (ClientDocument, answered_by, make_client, start, status, stop,  # noqa: E402
                                      wait_until_compiled)

REGIONS_PER_FILE = 3
BODY_LINES = (3, 8)            # function bodies of about five lines
PAUSE_S = 0.3                  # between regions: the user moves to another function (not measured)
DRAIN_TIMEOUT_S = 60           # wait this long for the last request of a region
GOALS_MS = {"p50": 30, "p95": 60}


@dataclass(frozen=True)
class Region:
    path: str
    line: int                  # 1-based line of the body's first statement
    start: int                 # character offsets of the body in the file text
    end: int

    def keystrokes(self, text: str) -> list[str]:
        """The body as typed: one character per key, except Enter brings the next line's indentation."""
        return re.findall(r"\n[ \t]*|.", text[self.start:self.end], re.S)


@dataclass
class Request:
    key: int                   # index of the keystroke that sent it, over the whole run
    sent: float
    future: Future
    received: float | None = None
    cancelled: bool = False    # the client sent $/cancelRequest for it
    text: str | None = None    # the first suggestion, "" when the answer was empty, None without an answer
    source: str = ""           # "cache" or "engine", for answered requests


@dataclass
class Replay:
    requests: list[Request] = field(default_factory=list)
    key_lag_ms: list[float] = field(default_factory=list)      # how late each keystroke was sent
    next_key_matches: int = 0         # suggestions that begin with the next keystroke
    whole_correct: int = 0            # suggestions that are exactly a prefix of the rest of the body
    regions: list[dict] = field(default_factory=list)


# -- what to type --------------------------------------------------------------------------------
def function_bodies(text: str, path: str) -> list[Region]:
    """Bodies (docstring excluded) of BODY_LINES lines, starting on their own line."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.split("\n")
    starts = [0, *itertools.accumulate(len(line) + 1 for line in lines)]
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if not body or body[0].lineno <= node.lineno:
            continue
        first, last = body[0].lineno, body[-1].end_lineno
        if not BODY_LINES[0] <= last - first + 1 <= BODY_LINES[1]:
            continue
        indent = len(lines[first - 1]) - len(lines[first - 1].lstrip())
        out.append(Region(path, first, starts[first - 1] + indent, starts[last - 1] + len(lines[last - 1])))
    return sorted(out, key=lambda r: r.start)


def pick(data: Path, files: int, seed: int) -> list[tuple[str, str, list[Region]]]:
    """`files` held-out Python files with REGIONS_PER_FILE bodies each, chosen by `seed`."""
    corpus = sorted((f for f in read_split(data / "held_out.jsonl") if f.path.endswith(".py") and "\r" not in f.text),
                    key=lambda f: f.path)
    rng = random.Random(seed)
    rng.shuffle(corpus)
    chosen = []
    for f in corpus:
        bodies = function_bodies(f.text, f.path)
        if len(bodies) >= REGIONS_PER_FILE:
            chosen.append((f.path, f.text, sorted(rng.sample(bodies, REGIONS_PER_FILE), key=lambda r: r.start)))
        if len(chosen) == files:
            break
    return chosen


# -- typing --------------------------------------------------------------------------------------
def send(client: LanguageClient, doc: ClientDocument, at: types.Position, key: int) -> Request:
    params = doc.inline_params(at, invoked=False)
    sent = time.perf_counter()
    req = Request(key, sent, client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params,
                                                          msg_id=f"replay-{key}"))

    def done(fut: Future) -> None:      # on the event loop, as the response is read
        req.received = time.perf_counter()
        if not fut.cancelled() and fut.exception() is None:
            result = fut.result()
            items = getattr(result, "items", result) or []
            req.text = items[0].insert_text if items else ""
            req.source = answered_by(items)
    req.future.add_done_callback(done)
    return req


def cancel(client: LanguageClient, req: Request) -> None:
    if not req.future.done():
        req.cancelled = True
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=f"replay-{req.key}"))


async def type_region(client: LanguageClient, run: Replay, uri: str, text: str, region: Region,
                      max_keys: int, interval_s: float) -> None:
    keys = region.keystrokes(text)
    body = text[region.start:region.end]
    doc = ClientDocument(client, uri, text[:region.start] + text[region.end:])
    at = doc.position_at(region.start)
    mine: list[Request] = []
    due = time.perf_counter()
    for key in keys[:max_keys]:
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        run.key_lag_ms.append((time.perf_counter() - due) * 1e3)
        due += interval_s
        if mine:
            cancel(client, mine[-1])
        at = doc.insert(at, key)
        mine.append(send(client, doc, at, len(run.requests)))
        run.requests.append(mine[-1])
    try:                # cancelled requests end in an error response: gathered, not raised
        await asyncio.wait_for(asyncio.gather(*(asyncio.wrap_future(r.future) for r in mine), return_exceptions=True),
                               DRAIN_TIMEOUT_S)
    except TimeoutError:
        pass            # what is still unanswered counts as failed
    doc.close()

    for i, req in enumerate(mine):
        if req.text is None or req.cancelled:
            continue
        typed = "".join(keys[:i + 1])
        if req.text:
            run.next_key_matches += i + 1 < len(keys) and req.text.startswith(keys[i + 1])
            run.whole_correct += body.startswith(req.text, len(typed))
    run.regions.append({"path": region.path, "line": region.line, "keys": len(mine), "body_keys": len(keys)})


# -- the run -------------------------------------------------------------------------------------
def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_server_args(ap)
    ap.add_argument("--files", type=int, default=3, help="held-out files to type into (default: 3)")
    ap.add_argument("--max-keys", type=int, default=800, help="keystrokes in the whole run (default: 800)")
    ap.add_argument("--seed", type=int, default=0, help="which files and bodies (default: 0)")
    ap.add_argument("--threads", type=int, help="the server's CPU threads (default: the server's choice)")
    ap.add_argument("--background-load", type=int, default=0, metavar="K",
                    help="other processes kept busy on the CPU while typing (default: 0)")
    ap.add_argument("--name", default="replay", help="results file name, without extension (default: replay)")
    return ap.parse_args(argv)


class BusyProcesses:
    """K processes spinning on the CPU (as a build or a test run would) while the context is open."""

    def __init__(self, count: int):
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> "BusyProcesses":
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        return self

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            p.kill()
            p.wait()


def ms_summary(values: list[float]) -> dict:
    if not values:
        return {"count": 0}
    return {"count": len(values), "p50": round(percentile(values, 50), 2), "p95": round(percentile(values, 95), 2),
            "p99": round(percentile(values, 99), 2), "mean": round(statistics.fmean(values), 2),
            "max": round(max(values), 2)}


def as_dict(value):
    """pygls hands back unknown results as namedtuples; JSON wants dicts."""
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    return value


def report(run: Replay, server: dict, args, seconds: float) -> dict:
    sent = run.requests
    cancelled = [r for r in sent if r.cancelled]
    answered = [r for r in sent if not r.cancelled and r.text is not None]
    failed = [r for r in sent if not r.cancelled and r.text is None]
    ms = {r.key: (r.received - r.sent) * 1e3 for r in answered}
    by_source = {s: ms_summary([ms[r.key] for r in answered if r.source == s]) for s in ("cache", "engine")}
    latency = ms_summary(list(ms.values()))
    cache_answers = sum(r.source == "cache" for r in answered)
    return {
        "command": "python benchmarks/replay.py " + " ".join(args.argv),
        "model": server.get("model") or args.model, "device": server.get("device"), "dtype": server.get("dtype"),
        "params": server.get("params"), "compiled": server.get("compiled"), "threads": server.get("threads"),
        "config": {"files": args.files, "regions_per_file": REGIONS_PER_FILE, "interval_ms": args.interval_ms,
                   "max_keys": args.max_keys, "seed": args.seed, "data": str(args.data),
                   "threads": args.threads, "background_load": args.background_load},
        "regions": run.regions,
        "requests": {"sent": len(sent), "answered": len(answered), "cancelled": len(cancelled),
                     "failed": len(failed), "answered_empty": sum(r.text == "" for r in answered),
                     "cancelled_but_answered": sum(r.text is not None for r in cancelled)},
        "latency_ms": latency,
        "latency_ms_by_source": by_source,
        "typing_through": {"answered_from_cache": cache_answers,
                           "share_answered_from_cache": round(cache_answers / len(answered), 4) if answered else None,
                           "next_key_matches": run.next_key_matches, "whole_suggestion_correct": run.whole_correct,
                           "suggestions": sum(bool(r.text) for r in answered)},
        "key_lag_ms": ms_summary(run.key_lag_ms),
        "goals_ms": GOALS_MS,
        "goals_met": bool(answered) and latency["p50"] < GOALS_MS["p50"] and latency["p95"] < GOALS_MS["p95"],
        "latency_samples_ms": [round(v, 3) for v in ms.values()],
        "sources": [r.source for r in answered],
        "server": server,
        "seconds": round(seconds, 1),
    }


def show(result: dict) -> None:
    req, lat, tt, srv = result["requests"], result["latency_ms"], result["typing_through"], result["server"]
    slat, seng = srv.get("latencyMs", {}), srv.get("engineMs", {})

    def pct(d: dict) -> str:
        return "  ".join(f"{q} {d[q]:7.1f}" for q in ("p50", "p95", "p99") if q in d) or "no samples"

    def share(part, whole) -> str:
        return f"{part} ({100 * part / whole:.0f}%)" if whole else str(part)

    print(f"\nspanfill replay: {len(result['regions'])} bodies in {result['config']['files']} held-out files, "
          f"{req['sent']} keystrokes at {result['config']['interval_ms']:g} ms; model {result['model']} on "
          f"{result['device']} ({result['dtype']}, {result['threads']} thread{'' if result['threads'] == 1 else 's'}), "
          f"{result['seconds']} s" + (f", {busy} busy processes beside it" if (busy := result['config']['background_load']) else ""))
    print(f"  requests            sent {req['sent']}   answered {share(req['answered'], req['sent'])}   "
          f"cancelled by the next key {req['cancelled']} ({req['cancelled_but_answered']} answered first)   "
          f"failed {req['failed']}   empty answers {req['answered_empty']}")
    print(f"  round trip (ms)     {pct(lat)}   (n={lat['count']}; goal p50 < {GOALS_MS['p50']}, p95 < {GOALS_MS['p95']}: "
          f"{'met' if result['goals_met'] else 'not met'})")
    for source, d in result["latency_ms_by_source"].items():
        print(f"    from {source:<6}       {pct(d)}   (n={d['count']})")
    print(f"  typing-through      {share(tt['answered_from_cache'], req['answered'])} answers from the cache "
          f"(server: {srv.get('cacheHits')} hits, hit rate {srv.get('cacheHitRate')}); "
          f"{tt['next_key_matches']} of {tt['suggestions']} suggestions began with the next keystroke, "
          f"{tt['whole_suggestion_correct']} were exactly right")
    reuse = srv.get("contextReuseRate")
    print(f"  server              {srv.get('requests')} requests, {srv.get('engineCalls')} engine calls, "
          f"superseded {srv.get('superseded')}, cancelled {srv.get('cancelled')}, context tokens reused "
          f"{'n/a' if reuse is None else f'{100 * reuse:.0f}%'}")
    print(f"    server latency    {pct(slat)}   engine {pct(seng)}")
    for name, d in (srv.get("engineStagesMs") or {}).items():
        print(f"      engine {name:<10} {pct(d)}")
    fallbacks = srv.get("compiledFallbacks")
    if fallbacks is not None:
        print(f"    compiled steps    calls that ran eagerly (guards rejected them): "
              + ", ".join(f"{k} {v}" for k, v in fallbacks.items()))
    print(f"  keystroke lag (ms)  {pct(result['key_lag_ms'])}   (how late the client sent keys; large = busy machine)")


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    samples, sources = result["latency_samples_ms"], result["sources"]
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4.2))
    groups = [[v for v, s in zip(samples, sources) if s == src] for src in ("cache", "engine")]
    hist.hist(groups, bins=40, stacked=True, label=["typing-through cache", "engine"])
    hist.set_xlabel("round trip per answered request (ms)")
    hist.set_ylabel("requests")
    hist.legend()
    ordered = sorted(samples)
    cdf.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], color="k", drawstyle="steps-post")
    for q, colour in (("p50", "tab:blue"), ("p95", "tab:orange"), ("p99", "tab:red")):
        value = result["latency_ms"][q]
        cdf.axvline(value, color=colour, label=f"{q} {value:.1f} ms")
    for q, goal in GOALS_MS.items():
        cdf.axvline(goal, color="grey", linestyle=":", label=f"goal {q} < {goal} ms")
    cdf.set_xlabel("round trip (ms)")
    cdf.set_ylabel("fraction of answered requests")
    cdf.legend(fontsize=8)
    for ax in (hist, cdf):
        ax.grid(alpha=0.3)
    fig.suptitle(f"spanfill replay: {result['requests']['answered']} answered of {result['requests']['sent']} "
                 f"keystrokes, {result['model']} on {result['device']} ({result['dtype']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


async def replay(args, chosen) -> tuple[Replay, dict] | None:
    client = make_client("spanfill-replay")
    log_file = Path(tempfile.gettempdir()) / "spanfill-replay.log"
    settings = {"model": args.model, "device": args.device}
    if args.threads is not None:
        settings["threads"] = args.threads
    st = await start(client, log_file, **settings)
    try:
        if st.state != "ready":
            print(f"the model did not load: {st.error}\n(pass --model DIR; server log: {log_file})")
            return None
        st = await wait_until_compiled(client)
        if st.device == "cpu" and not st.compiled:
            print(f"the server's compiled CPU steps are not in use ({st.compile}); measuring eager (log: {log_file})")
        run = Replay()
        regions = [(path, text, r) for path, text, rs in chosen for r in rs]
        with BusyProcesses(args.background_load):
            for i, (path, text, region) in enumerate(regions):
                budget = (args.max_keys - len(run.requests)) // (len(regions) - i)
                if budget > 0:
                    uri = f"file:///spanfill-replay/{i}/{path}"
                    await type_region(client, run, uri, text, region, budget, args.interval_ms / 1e3)
                    await asyncio.sleep(PAUSE_S)
        return run, as_dict(await status(client))
    finally:
        await stop(client)


def main(argv=None) -> int:
    args, held_out = common.parse_server_run(parse_args, argv, "replay")
    if held_out is None:
        return 2
    chosen = pick(args.data, args.files, args.seed)
    if not chosen:
        sys.stderr.write(f"replay: no Python file in {held_out} has {REGIONS_PER_FILE} function bodies of "
                         f"{BODY_LINES[0]}-{BODY_LINES[1]} lines\n")
        return 2
    t0 = time.perf_counter()
    done = asyncio.run(replay(args, chosen))
    if done is None:
        return 1
    result = report(*done, args, time.perf_counter() - t0)
    show(result)
    path = write(args.name, result)
    if result["latency_samples_ms"]:
        plot(result, common.RESULTS / f"{args.name}.png")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
