"""The protocol's own share of every answer: round trips through the real `spanfill serve` over stdio
that never reach the engine, with stdin read on the event loop (streams.MessageReader, what the
server does on a pipe) against pygls's threaded reader (what it does on a file), in one run.

    python benchmarks/protocol_rtt.py [--rounds 20] [--per-round 50] [--name protocol_rtt]

Two servers run side by side, the second made to read stdin on pygls's thread; they take turns, a
round of requests each, so both see the same machine. Each keeps its model eager (SPANFILL_COMPILE=0:
no compile in the background) and completions off for every language, so a request is the protocol
and the pipeline's entry alone:

* *status*: a `spanfill/status` request and its response;
* *keystroke*: what a keystroke sends, an incremental didChange then an Automatic inlineCompletion,
  until its (empty) answer is read.

Writes results/<name>.json; report_replay.py renders it beside the replay.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types

sys.path.insert(0, str(Path(__file__).parent))
import common  # noqa: E402

from spanfill.server.headless import ClientDocument, make_client, start, status, stop  # noqa: E402

READERS = ("event loop", "thread")
THREADED = ("from spanfill.server import serve, streams\n"
            "streams.waitable = lambda stream: False\n"      # every stdin as if it were a file
            "serve.main(['--log-file', {log!r}])\n")
TEXT = "def f(x):\n    return x\n\n\n" * 50


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20, help="turns each server takes")
    ap.add_argument("--per-round", type=int, default=50, help="requests of each kind in a turn")
    ap.add_argument("--model", help="model directory (default: the shipped model)")
    ap.add_argument("--name", default="protocol_rtt")
    return ap.parse_args(argv)


async def start_server(reader: str, log_file: Path, model: str | None):
    client = make_client(f"rtt-{reader}")
    script = THREADED.format(log=str(log_file)) if reader == "thread" else None
    await start(client, log_file, script=script, env={**os.environ, "SPANFILL_COMPILE": "0"}, enable={"*": False},
                **({"model": model} if model else {}))
    return client, ClientDocument(client, "file:///rtt/typing.py", TEXT)


async def one_round(client, doc: ClientDocument, at: types.Position, n: int, out: dict) -> types.Position:
    for _ in range(n):
        t0 = time.perf_counter()
        await status(client)
        out["status"].append((time.perf_counter() - t0) * 1e3)
    for _ in range(n):
        t0 = time.perf_counter()
        at = doc.insert(at, "a")
        items = await client.text_document_inline_completion_async(doc.inline_params(at, invoked=False))
        out["keystroke"].append((time.perf_counter() - t0) * 1e3)
        assert items is None or not items.items, "completions are off: the answer must be empty"
    return at


def reader_logged(log_file: Path) -> str | None:
    """Where the server said it reads stdin (lsp.start_io logs it): "event loop" or "thread"."""
    for line in log_file.read_text().splitlines():
        if "reading stdin on " in line:
            return "event loop" if line.endswith("on the event loop") else "thread"
    return None


def log_of(log_dir: Path, reader: str) -> Path:
    return log_dir / f"{reader.replace(' ', '_')}.log"


async def measure(args, log_dir: Path) -> dict:
    servers = {r: await start_server(r, log_of(log_dir, r), args.model) for r in READERS}
    samples = {r: {"status": [], "keystroke": []} for r in READERS}
    cursors = {r: types.Position(line=200, character=0) for r in READERS}
    try:
        for _ in range(args.rounds):
            for r in READERS:
                client, doc = servers[r]
                cursors[r] = await one_round(client, doc, cursors[r], args.per_round, samples[r])
    finally:
        for client, _ in servers.values():
            await stop(client)
    return samples


def main(argv=None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as logs:
        samples = asyncio.run(measure(args, Path(logs)))
        logged = {r: reader_logged(log_of(Path(logs), r)) for r in READERS}
    if logged != {r: r for r in READERS}:
        raise SystemExit(f"the servers did not read stdin as meant: {logged}")
    readers = {r: {kind: common.summary(ms) for kind, ms in kinds.items()} for r, kinds in samples.items()}
    for r, kinds in readers.items():
        print(f"{r:>10}: " + ", ".join(f"{k} p50 {s['median_ms']:.2f} ms p95 {s['p95_ms']:.2f}" for k, s in kinds.items()))
    path = common.write(args.name, {"command": " ".join(["python benchmarks/protocol_rtt.py", *(argv or sys.argv[1:])]),
                                    "rounds": args.rounds, "per_round": args.per_round, "readers": readers})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
