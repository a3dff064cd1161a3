"""`spanfill serve`: run the language server over stdio (what editors start) or TCP.

    spanfill serve                              stdio, the shipped model
    spanfill serve --tcp 127.0.0.1:2087         TCP, for attaching a client by hand
    spanfill serve --model DIR --log-file spanfill.log --log-level debug

oneDNN, which runs bf16 matmuls on the CPU, keeps a compiled primitive for every matmul shape it
meets, in two caches of 1,024 entries (its own and PyTorch's ideep), each primitive holding its
JIT code and buffers. Prefill lengths differ from request to request, so over a long session the
server's memory grew with every new shape (benchmarks/soak.py); `spanfill serve` keeps 64 of each
unless the environment says otherwise, which holds the span steps' few shapes and recent prefills.

stdout carries the protocol and nothing else: before serving stdio, file descriptor 1 is moved
aside for the protocol and pointed at stderr, so a stray print (ours, or a library's, even from C)
lands in the log instead of corrupting the stream. Settings sent by the editor in
`initializationOptions` override --model/--device/--threads, except their unset values (model null,
device "auto", threads null), which keep the command line's (settings.py).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from .settings import Settings, apply_settings


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="spanfill serve", description="spanfill language server")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    parser.add_argument("--model", help="model directory (default: the shipped model)")
    parser.add_argument("--device", help="auto, cpu, cuda, cuda:N or mps (default: auto)")
    parser.add_argument("--threads", type=int, help="CPU threads for the model (default: one fewer than the cores)")
    parser.add_argument("--log-file", help="write logs here instead of stderr")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            parser.error(f"--tcp {args.tcp!r} is not HOST:PORT (a port 0..65535), e.g. 127.0.0.1:2087")
        args.host, args.port = host, int(port)
    return args


NATIVE_CACHES = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64", "LRU_CACHE_CAPACITY": "64"}


def bound_native_caches(environ=os.environ) -> None:
    """Cap oneDNN's per-shape caches; before torch is imported, which reads them once."""
    for name, value in NATIVE_CACHES.items():
        environ.setdefault(name, value)


def configure_logging(log_file: str | None, level: str) -> None:
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)                       # libraries: warnings only
    logging.getLogger("spanfill").setLevel(level.upper())


def protocol_stdout():
    """A binary stream on the original stdout; fd 1 (and sys.stdout) now go to stderr."""
    sys.stdout.flush()
    stream = os.fdopen(os.dup(1), "wb")    # buffered: a raw pipe write may be partial
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    cli = {k: v for k, v in (("model", args.model), ("device", args.device), ("threads", args.threads)) if v is not None}
    settings, problems = apply_settings(Settings(), cli)
    if problems:
        sys.stderr.write("\n".join(problems) + "\n")
        return 2
    configure_logging(args.log_file, args.log_level)
    bound_native_caches()
    from .lsp import server   # imports torch: after logging is set up and the caches are capped

    server.session.settings = server.session.defaults = settings
    try:
        if args.tcp:
            server.start_tcp(args.host, args.port)
        else:
            server.start_io(sys.stdin.buffer, protocol_stdout())  # pygls flushes and closes it as it ends
    except Exception:     # the reader's own failure (an OSError on stdin): logged, and the server still goes
        logging.getLogger(__name__).exception("the connection ended with an error")
        server.exit_code = server.exit_code or 1
    finally:
        # the engine's worker may be inside a model load (or a stuck call), which Python would wait for
        # at exit: the editor asked the server to go (or the connection is gone), so it goes now
        logging.shutdown()
        sys.stderr.flush()
        os._exit(server.exit_code)
