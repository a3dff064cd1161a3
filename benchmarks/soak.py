"""Soak: type into the real `spanfill serve` for a long while as documents open and close around
the typing, and watch what the server holds and how fast it answers over time; then check that
resources stay bounded under a thousand open documents, a 5 MB document and a 1 MB single line.

    python benchmarks/soak.py [--model DIR] [--data data/] [--minutes 30] [--sample-s 30]
                              [--churn-s 10] [--churn-docs 20] [--max-open 100]
                              [--many-docs 1000] [--big-mb 5] [--line-mb 1] [--name soak]

Typing is benchmarks/replay.py's: function bodies of held-out files typed back one keystroke per
`--interval-ms`, each with an Automatic inline-completion request (the previous one cancelled if
still out), every body in a freshly opened document closed after it. Meanwhile every `--churn-s`
seconds `--churn-docs` other held-out files are opened and the oldest closed beyond `--max-open`,
and every `--sample-s` seconds `spanfill/status` is sampled: resident memory, open documents, the
typing-through cache, context windows, the engine's KV-cache entries, and the round trips of the
requests answered since the last sample (p50/p95). Growth and drift are judged after the first
sixth of the run (warm-up: compiled graphs, allocator pools, caches filling).

The bounded-resources part runs on the same server afterwards, each case opened, asked at a few
places (every request must be answered), measured and closed again.
Writes results/<name>.json and results/<name>.png.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from lsprotocol import types

sys.path.insert(0, str(Path(__file__).parent))
import common  # noqa: E402
import replay  # noqa: E402
import waits  # noqa: E402
from common import percentile, write  # noqa: E402

from spanfill.engine import read_split  # noqa: E402
from spanfill.server.headless import ClientDocument, make_client, start, status, stop, wait_until_compiled  # noqa: E402

REQUEST_TIMEOUT_S = 120        # a bound on waiting for one answer in the bounded-resources part
MAX_KEYS_PER_BODY = 400


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.add_server_args(ap)
    ap.add_argument("--minutes", type=float, default=30.0, help="typing time (default: 30)")
    ap.add_argument("--sample-s", type=float, default=30.0, help="seconds between samples (default: 30)")
    ap.add_argument("--churn-s", type=float, default=10.0, help="seconds between document churns (default: 10)")
    ap.add_argument("--churn-docs", type=int, default=20, help="documents opened per churn (default: 20)")
    ap.add_argument("--max-open", type=int, default=100, help="churned documents kept open (default: 100)")
    ap.add_argument("--many-docs", type=int, default=1000, help="documents open at once, bounded part (default: 1000)")
    ap.add_argument("--big-mb", type=float, default=5.0, help="size of the large document (default: 5)")
    ap.add_argument("--line-mb", type=float, default=1.0, help="size of the single-line document (default: 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="soak", help="results file name, without extension (default: soak)")
    return ap.parse_args(argv)


# -- the soak ------------------------------------------------------------------------------------
class Soak:
    def __init__(self, client, files, args):
        self.client, self.files, self.args = client, files, args
        self.run = replay.Replay()
        self.samples: list[dict] = []
        self.opened = itertools.count()
        self.churned: list[ClientDocument] = []
        self.t0 = self.last_sample = time.perf_counter()

    def bodies(self):
        """(path, text, region) to type, in a seeded order, forever."""
        rng = random.Random(self.args.seed)
        regions = [(f.path, f.text, r) for f in self.files for r in replay.function_bodies(f.text, f.path)]
        while True:
            rng.shuffle(regions)
            yield from regions

    async def type_until(self, deadline: float) -> None:
        for i, (path, text, region) in zip(itertools.count(), self.bodies()):
            if time.perf_counter() >= deadline:
                return
            await replay.type_region(self.client, self.run, f"file:///soak/typed/{i}/{path}", text, region,
                                     MAX_KEYS_PER_BODY, self.args.interval_ms / 1e3)
            await asyncio.sleep(replay.PAUSE_S)

    async def churn(self) -> None:
        texts = itertools.cycle(self.files)
        while True:
            await asyncio.sleep(self.args.churn_s)
            for _ in range(self.args.churn_docs):
                f = next(texts)
                self.churned.append(ClientDocument(self.client, f"file:///soak/open/{next(self.opened)}/{f.path}", f.text))
            while len(self.churned) > self.args.max_open:
                self.churned.pop(0).close()

    async def sample_every(self, seconds: float) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(seconds)

    async def sample(self) -> None:
        st = common.as_dict(await status(self.client))
        since, now = self.last_sample, time.perf_counter()
        self.last_sample = now
        window = [(r.received - r.sent) * 1e3 for r in self.run.requests
                  if r.received is not None and since < r.received <= now and not r.cancelled and r.text is not None]
        res = st["resources"]
        self.samples.append({
            "t_s": round(now - self.t0, 1), "rss_mb": res["rssMb"], "open_documents": res["openDocuments"],
            "typing_cache": res["typingCache"], "context_windows": res["contextWindows"],
            "engine_cache_entries": (st.get("engineCache") or {}).get("entries"),
            "requests_sent": len(self.run.requests), "answered_in_window": len(window),
            "p50_ms": round(percentile(window, 50), 2) if window else None,
            "p95_ms": round(percentile(window, 95), 2) if window else None,
            "engine_failures": st["engineFailures"]})


def drift(samples: list[dict], warm_s: float) -> dict:
    """Memory growth and latency drift once warm: RSS first-warm vs last, its fitted slope, and
    the median of the windows' p50/p95 in the first and last third of the warm run."""
    warm = [s for s in samples if s["t_s"] >= warm_s] or samples
    t = np.array([s["t_s"] for s in warm]) / 3600
    rss = np.array([s["rss_mb"] for s in warm])
    slope = float(np.polyfit(t, rss, 1)[0]) if len(warm) > 2 and np.ptp(t) > 0 else None
    third = max(1, len(warm) // 3)

    def med(part, key):
        values = [s[key] for s in part if s[key] is not None]
        return round(float(np.median(values)), 2) if values else None

    return {"warm_from_s": warm_s, "rss_mb_warm_first": float(rss[0]), "rss_mb_last": float(rss[-1]),
            "rss_mb_max": float(rss.max()), "rss_growth_mb": round(float(rss[-1] - rss[0]), 1),
            "rss_slope_mb_per_hour": None if slope is None else round(slope, 1),
            "p50_ms_first_third": med(warm[:third], "p50_ms"), "p50_ms_last_third": med(warm[-third:], "p50_ms"),
            "p95_ms_first_third": med(warm[:third], "p95_ms"), "p95_ms_last_third": med(warm[-third:], "p95_ms")}


# -- bounded resources ---------------------------------------------------------------------------
async def ask(client, doc: ClientDocument, at: types.Position) -> float | None:
    """Round trip of one Invoked inline-completion request in ms; None if it got no result."""
    sent = time.perf_counter()
    try:
        await asyncio.wait_for(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, doc.inline_params(at, invoked=True)), REQUEST_TIMEOUT_S)
    except Exception as err:          # a timeout or an error response: counted as unanswered
        print(f"  no answer at {at} in {doc.uri}: {type(err).__name__}: {err}")
        return None
    return (time.perf_counter() - sent) * 1e3


async def rss(client) -> float:
    return (await status(client)).resources.rssMb


async def case(client, name: str, docs: list[ClientDocument], places: list[tuple[ClientDocument, types.Position]],
               before: float) -> dict:
    """With `docs` just opened (RSS `before` they were): ask at `places`, then close them. Memory
    with them open, after the requests, and after closing."""
    opened = await rss(client)
    ms = [await ask(client, doc, at) for doc, at in places]
    asked = await rss(client)
    for doc in docs:
        doc.close()
    closed = await rss(client)
    answered = [m for m in ms if m is not None]
    out = {"documents": len(docs), "chars": sum(len("\n".join(d.lines)) for d in docs),
           "rss_mb_before": before, "rss_mb_open": opened, "rss_mb_after_requests": asked,
           "rss_mb_after_close": closed, "requests": len(ms), "answered": len(answered),
           "latency_ms": waits.ms_summary(answered)}
    lat = out["latency_ms"]
    print(f"  {name:<15} {out['documents']:5d} docs, {out['chars'] / 2**20:5.1f} MB of text: RSS {before:.0f} -> "
          f"{opened:.0f} open -> {asked:.0f} asked -> {closed:.0f} MB closed; {out['answered']}/{out['requests']} "
          f"answered, p50 {lat.get('p50', float('nan')):.1f} ms, max {lat.get('max', float('nan')):.1f} ms")
    return out


def sized(texts, chars: int) -> str:
    """Held-out files one after another until `chars` characters (a large, ordinary document)."""
    parts, total = [], 0
    for text in itertools.cycle(texts):
        parts.append(text)
        total += len(text)
        if total >= chars:
            return "".join(parts)[:chars]


def one_line(chars: int) -> str:
    """A single line of `chars` characters, as generated data or minified code has."""
    line = "DATA = [" + ", ".join(str(i) for i in range(chars // 4))      # more than enough numbers
    return line[:chars - 1] + "]"


async def bounded(client, files, args) -> dict:
    rng = random.Random(args.seed)
    texts = [f.text for f in files]
    print("bounded resources:")
    out = {}
    before = await rss(client)
    many = [ClientDocument(client, f"file:///soak/many/{i}/{files[i % len(files)].path}", texts[i % len(texts)])
            for i in range(args.many_docs)]
    places = [(doc, doc.position_at(rng.randint(0, len("\n".join(doc.lines)))))
              for doc in rng.sample(many, min(20, len(many)))]
    out["many_documents"] = await case(client, "many documents", many, places, before)

    before = await rss(client)
    big = ClientDocument(client, "file:///soak/big.py", sized(texts, int(args.big_mb * 2**20)))
    end = big.position_at(len("\n".join(big.lines)))
    middle = big.insert(big.position_at(len("\n".join(big.lines)) // 2), "\nresult = ")
    out["big_document"] = await case(client, "large document", [big],
                                     [(big, types.Position(0, 0)), (big, middle), (big, end)], before)

    before = await rss(client)
    line = ClientDocument(client, "file:///soak/line.py", one_line(int(args.line_mb * 2**20)))
    width = len(line.lines[0])
    at_end = line.insert(types.Position(0, width), ", x")
    out["single_line"] = await case(client, "single line", [line],
                                    [(line, types.Position(0, 0)), (line, types.Position(0, width // 2)),
                                     (line, at_end)], before)
    out["rss_mb_end"] = await rss(client)
    return out


# -- the run -------------------------------------------------------------------------------------
async def soak(args, files) -> dict | None:
    client = make_client("spanfill-soak")
    log_file = Path(tempfile.gettempdir()) / f"spanfill-{args.name}.log"
    st = await start(client, log_file, model=args.model, device=args.device)
    try:
        if st.state != "ready":
            print(f"the model did not load: {st.error}\n(pass --model DIR; server log: {log_file})")
            return None
        st = common.as_dict(await wait_until_compiled(client))
        print(f"soak: {args.minutes:g} min of typing on {st['model']} ({st['device']}, {st['dtype']}, "
              f"compiled: {st['compiled']}); server log {log_file}")
        run = Soak(client, files, args)
        background = [asyncio.ensure_future(run.churn()), asyncio.ensure_future(run.sample_every(args.sample_s))]
        try:
            await run.type_until(run.t0 + args.minutes * 60)
        finally:
            for task in background:
                task.cancel()
        for doc in run.churned:
            doc.close()
        await run.sample()
        result = {"samples": run.samples, "typing": run.run, "seconds": time.perf_counter() - run.t0}
        result["bounded"] = await bounded(client, files, args)
        result["server"] = common.as_dict(await status(client))
        result["server_at_start"] = st
        return result
    finally:
        await stop(client)


def report(done: dict, args) -> dict:
    sent = done["typing"].requests
    answered = [r for r in sent if not r.cancelled and r.text is not None]
    start = done["server_at_start"]
    return {
        "command": "python benchmarks/soak.py " + " ".join(args.argv),
        "model": start.get("model"), "device": start.get("device"), "dtype": start.get("dtype"),
        "int8_matmuls": start.get("int8Matmuls"), "compiled": start.get("compiled"), "threads": start.get("threads"),
        "config": {k: v for k, v in vars(args).items() if k != "argv"} | {"data": str(args.data)},
        "requests": {"sent": len(sent), "answered": len(answered), "cancelled": sum(r.cancelled for r in sent),
                     "failed": sum(not r.cancelled and r.text is None for r in sent)},
        "bodies_typed": len(done["typing"].regions),
        "latency_ms": waits.ms_summary([(r.received - r.sent) * 1e3 for r in answered]),
        "drift": drift(done["samples"], args.minutes * 60 / 6),
        "samples": done["samples"],
        "bounded": done["bounded"],
        "server": done["server"],
        "seconds": round(done["seconds"], 1),
    }


def show(result: dict) -> None:
    d, req, lat = result["drift"], result["requests"], result["latency_ms"]
    print(f"\nspanfill soak: {result['seconds'] / 60:.1f} min, {result['bodies_typed']} bodies typed, "
          f"{len(result['samples'])} samples")
    print(f"  requests        sent {req['sent']}  answered {req['answered']}  cancelled {req['cancelled']}  "
          f"failed {req['failed']}; round trip p50 {lat.get('p50')} ms, p95 {lat.get('p95')} ms")
    print(f"  memory (warm)   RSS {d['rss_mb_warm_first']:.0f} -> {d['rss_mb_last']:.0f} MB (max {d['rss_mb_max']:.0f}), "
          f"growth {d['rss_growth_mb']} MB, fitted slope {d['rss_slope_mb_per_hour']} MB/h")
    print(f"  latency drift   p50 {d['p50_ms_first_third']} -> {d['p50_ms_last_third']} ms, "
          f"p95 {d['p95_ms_first_third']} -> {d['p95_ms_last_third']} ms (first vs last third of the warm run)")
    last = result["samples"][-1]
    print(f"  held at the end open documents {last['open_documents']}, typing cache {last['typing_cache']}, "
          f"context windows {last['context_windows']}, engine cache entries {last['engine_cache_entries']}, "
          f"engine failures {last['engine_failures']}")


def plot(result: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    samples = result["samples"]
    minutes = [s["t_s"] / 60 for s in samples]
    fig, (mem, held, lat) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    mem.plot(minutes, [s["rss_mb"] for s in samples], color="k")
    mem.set_ylabel("server RSS (MB)")
    for key, label in (("open_documents", "open documents"), ("typing_cache", "typing-cache entries"),
                       ("context_windows", "context windows"), ("engine_cache_entries", "engine KV-cache entries")):
        held.plot(minutes, [s[key] for s in samples], label=label)
    held.set_ylabel("held by the server")
    held.legend(fontsize=8)
    for key, colour in (("p50_ms", "tab:blue"), ("p95_ms", "tab:orange")):
        lat.plot(minutes, [s[key] for s in samples], color=colour, marker=".", label=f"round trip {key[:3]}")
    lat.set_ylabel("ms, per sample window")
    lat.set_xlabel("minutes")
    lat.legend(fontsize=8)
    for ax in (mem, held, lat):
        ax.grid(alpha=0.3)
        ax.axvline(result["drift"]["warm_from_s"] / 60, color="grey", linestyle=":")
    fig.suptitle(f"spanfill soak: {result['model']} on {result['device']} ({result['dtype']}), "
                 f"{result['requests']['sent']} requests in {result['seconds'] / 60:.0f} min", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    args, held_out = common.parse_server_run(parse_args, argv, "soak")
    if held_out is None:
        return 2
    files = sorted((f for f in read_split(held_out) if f.path.endswith(".py") and "\r" not in f.text),
                   key=lambda f: f.path)
    if not any(replay.function_bodies(f.text, f.path) for f in files):
        sys.stderr.write(f"soak: no Python file in {held_out} has a function body of "
                         f"{replay.BODY_LINES[0]}-{replay.BODY_LINES[1]} lines to type\n")
        return 2
    done = asyncio.run(soak(args, files))
    if done is None:
        return 1
    result = report(done, args)
    show(result)
    path = write(args.name, result)
    plot(result, common.RESULTS / f"{args.name}.png")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
