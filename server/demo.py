"""`spanfill demo` (what `make run` runs): a headless editor session against the real server.

It starts `spanfill serve` as a subprocess, talks LSP to it with pygls's client, opens
examples/inventory.py, asks for completions in the unfinished functions, types a few characters
the way an editor would (a didChange and an automatic request per keystroke), and prints every
answer with its round-trip latency and whether the engine or the typing-through cache served it.
On a CPU it does so twice: at once, while the server still answers with its eager steps, and again
once its compiled steps are built (minutes), to show both latencies.

    spanfill demo [--model DIR] [--device cpu] [--file PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from .headless import ClientDocument, answered_by, make_client, start, status, stop, wait_until_compiled

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "inventory.py"
TYPED = "item = find("          # typed one character at a time into restock()
ANCHORS = ("def restock", "def cheapest")   # the functions whose empty body lines the demo completes in


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spanfill demo", description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: the shipped model)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda (default: auto)")
    parser.add_argument("--file", type=Path, default=EXAMPLE, help="Python file to type into")
    return parser.parse_args(argv)


def empty_line_after(lines: list[str], anchor: str) -> int | None:
    """The first empty line after the line that starts with `anchor` (None: no such line)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(anchor)), None)
    if start is None:
        return None
    return next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), None)


class DemoFile(ClientDocument):
    """examples/inventory.py open in the headless editor, and the requests the demo sends about it."""

    def __init__(self, client: LanguageClient, path: Path):
        super().__init__(client, path.resolve().as_uri(), path.read_text(encoding="utf-8"))

    def cursor_after(self, anchor: str) -> types.Position:
        """The end of the (empty, indented) line below the docstring of the function `anchor`."""
        line = empty_line_after(self.lines, anchor)
        return types.Position(line, len(self.lines[line]))

    async def complete(self, at: types.Position, invoked: bool) -> tuple[list[str], float, str]:
        """Candidates, round-trip milliseconds, and who answered ("engine" or "cache", as the server
        reports it in each item's command)."""
        t0 = time.perf_counter()
        result = await self.client.text_document_inline_completion_async(self.inline_params(at, invoked))
        ms = (time.perf_counter() - t0) * 1e3
        return [item.insert_text for item in result.items], ms, answered_by(result.items)


def show(texts: list[str], ms: float, source: str, label: str = "") -> None:
    head = f"  {label:<14}{ms:7.1f} ms  {source:<6}"
    if not texts:
        print(f"{head} (no suggestion)")
    for i, text in enumerate(texts):
        print(f"{head if i == 0 else ' ' * len(head)} -> {text!r}")


async def scenario(client: LanguageClient, path: Path) -> None:
    """Open `path` afresh, complete in restock() (invoked), type into it, complete in cheapest()."""
    doc = DemoFile(client, path)
    at = doc.cursor_after(ANCHORS[0])
    print(f"{path.name}:{at.line + 1} restock(), empty body line, invoked (several candidates):")
    show(*await doc.complete(at, invoked=True))
    print(f"\ntyping {TYPED!r} there, one automatic request per keystroke:")
    for ch in TYPED:
        at = doc.insert(at, ch)
        show(*await doc.complete(at, invoked=False), label=f"typed {ch!r}")
    at = doc.cursor_after(ANCHORS[1])
    print(f"\n{path.name}:{at.line + 1} cheapest(), empty body line, automatic:")
    show(*await doc.complete(at, invoked=False))
    doc.close()


async def run(args: argparse.Namespace, log_file: Path) -> int:
    client = make_client("spanfill-demo")
    print(f"spanfill demo: starting the server and loading {args.model or 'the shipped model'} ...")
    st = await start(client, log_file, model=args.model, device=args.device)
    try:
        if st.state != "ready":
            print(f"the model did not load: {st.error}\n(train one with `spanfill train`, or pass --model DIR)")
            return 1
        print(f"model {st.model} on {st.device} ({st.dtype}, {st.params:,} parameters)")
        compiling = st.compile == "compiling"
        if compiling:
            print("the compiled CPU steps are building in the background (two to five minutes on 2 cores); "
                  "until then the server answers with its eager steps:")
        print()
        await scenario(client, args.file)
        if compiling:
            print("\nwaiting for the compiled CPU steps ...")
            st = await wait_until_compiled(client)
            if st.compiled:
                print("compiled; the same again with the compiled steps:\n")
                await scenario(client, args.file)
            else:
                print(f"not compiled ({st.compile}); the server stays eager (see {log_file})")

        st = await status(client)
        lat = st.latencyMs
        print(f"\nserver: {st.requests} requests, {st.engineCalls} engine calls, {st.cacheHits} from the "
              f"typing-through cache; latency p50 {getattr(lat, 'p50', 0):.1f} ms, p95 {getattr(lat, 'p95', 0):.1f} ms "
              f"(server side, all answers); context tokens reused {100 * (st.contextReuseRate or 0):.0f}%")
        print(f"server log: {log_file}")
        return 0
    finally:
        await stop(client)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if not args.file.is_file():
        sys.stderr.write(f"spanfill demo: {args.file} is not a file; pass --file PATH\n")
        return 2
    try:
        lines = args.file.read_text(encoding="utf-8").split("\n")     # as DemoFile (ClientDocument) reads it
    except (OSError, UnicodeDecodeError) as err:
        sys.stderr.write(f"spanfill demo: cannot read {args.file}: {err}\n")
        return 2
    if missing := [anchor for anchor in ANCHORS if empty_line_after(lines, anchor) is None]:
        sys.stderr.write(f"spanfill demo: {args.file} has no {' and no '.join(repr(a) for a in missing)} followed "
                         f"by an empty body line, where the demo types (see examples/inventory.py)\n")
        return 2
    log_file = Path(tempfile.gettempdir()) / "spanfill-demo.log"
    return asyncio.run(run(args, log_file))
