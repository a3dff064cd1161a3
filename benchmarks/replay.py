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

The headline is what a user waits for, per keystroke: *keystroke to suggestion*, from the keystroke
(its request sent) to the first answer the editor shows for it or for a later keystroke of the same
body; waits.py counts it (a keystroke whose request was cancelled waits on; one never answered waits
for ever). Beside it: the share of keystrokes answered before the next key, and the round trip of
those answered requests alone (request sent -> response read), which leaves out exactly the slow
requests a keystroke cancelled.

Also reported: which answers came from the typing-through cache (the server says so in each item);
how many suggestions began with the very next keystroke (where typing through can answer next); and
the server's own view from `spanfill/status` (cache hit rate, context-token reuse,
superseded/cancelled, the engine's latency percentiles per stage). Engine answers' latencies would
include the server's debounce (`debounceMs`), since an editor waits for it too; it is 0 by default
(editors debounce before they ask), and the replay keeps it. The latency goals (waits.GOALS_MS) are
judged on keystroke to suggestion. Writes results/<name>.json and results/<name>.png.

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
import waits  # noqa: E402
from common import write  # noqa: E402
from replay_show import plot, show  # noqa: E402

from spanfill.engine import read_split  # noqa: E402
from spanfill.server.headless import (ClientDocument, answered_by, make_client, start, status, stop,  # noqa: E402
                                      wait_until_compiled)

REGIONS_PER_FILE = 3
BODY_LINES = (3, 8)            # function bodies of about five lines
PAUSE_S = 0.3                  # between regions: the user moves to another function (not measured)
DRAIN_TIMEOUT_S = 60           # wait this long for the last request of a region


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
    region: int                # the body it was typed in: a wait never runs on into the next body
    sent: float
    future: Future | None
    received: float | None = None
    cancelled: bool = False    # the client sent $/cancelRequest for it
    text: str | None = None    # the first suggestion, "" when the answer was empty, None without an answer
    source: str = ""           # "cache" or "engine", for answered requests

    @property
    def shown(self) -> bool:
        """Answered before the next keystroke, so the editor shows the answer ("": no ghost text)."""
        return self.text is not None and not self.cancelled


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
def send(client: LanguageClient, doc: ClientDocument, at: types.Position, key: int, region: int) -> Request:
    params = doc.inline_params(at, invoked=False)
    sent = time.perf_counter()
    req = Request(key, region, sent, client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params,
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
        mine.append(send(client, doc, at, len(run.requests), len(run.regions)))
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


def report(run: Replay, server: dict, args, seconds: float) -> dict:
    return {
        "command": "python benchmarks/replay.py " + " ".join(args.argv),
        "model": server.get("model") or args.model, "device": server.get("device"), "dtype": server.get("dtype"),
        "params": server.get("params"), "compiled": server.get("compiled"), "threads": server.get("threads"),
        "config": {"files": args.files, "regions_per_file": REGIONS_PER_FILE, "interval_ms": args.interval_ms,
                   "max_keys": args.max_keys, "seed": args.seed, "data": str(args.data),
                   "threads": args.threads, "background_load": args.background_load},
        "regions": run.regions,
        **waits.account(run),
        "server": server,
        "seconds": round(seconds, 1),
    }


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
        return run, common.as_dict(await status(client))
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
    if any(v is not None for v in result["wait_samples_ms"]):
        plot(result, common.RESULTS / f"{args.name}.png")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
