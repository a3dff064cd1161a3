"""`spanfill` command line: one entry point, subcommands dispatch to the module that owns them.

    spanfill serve [--tcp HOST:PORT]        language server over stdio (what editors start)
    spanfill demo                           headless session on an example file (make run)
    spanfill data | train | average | grow | eval | batch
                                            corpus, training, weight averaging, depth growth,
                                            held-out evaluation, batch completion
    spanfill export-llama                   write the causal half as a LlamaForCausalLM checkpoint
"""
from __future__ import annotations

import importlib
import os
import sys

COMMANDS = {
    "serve": ("spanfill.server.serve", "language server over stdio or TCP"),
    "demo": ("spanfill.server.demo", "headless LSP session on an example file, prints completions"),
    "data": ("spanfill.engine.tools.corpus_cli", "build the training corpus and held-out split"),
    "train": ("spanfill.engine.training.train", "train or resume a model"),
    "average": ("spanfill.engine.training.averaging", "write the mean of a run's checkpoints as a model"),
    "grow": ("spanfill.engine.training.growing", "write a model with more layers that computes the same"),
    "eval": ("spanfill.engine.tools.evaluate", "held-out evaluation: exact match, edit similarity, latency"),
    "batch": ("spanfill.engine.tools.batch", "complete every line of a JSONL file"),
    "export-llama": ("spanfill.engine.tools.export_llama", "export the causal half as LlamaForCausalLM"),
}


def usage() -> str:
    rows = "\n".join(f"  {name:<14}{text}" for name, (_, text) in COMMANDS.items())
    return f"usage: spanfill COMMAND [ARGS]\n\ncommands:\n{rows}\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(usage())
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        sys.stderr.write(f"spanfill: unknown command {command!r}\n\n{usage()}")
        return 2
    module = importlib.import_module(COMMANDS[command][0])
    try:
        return module.main(rest) or 0
    except KeyboardInterrupt:
        sys.stderr.write(f"\nspanfill {command}: interrupted\n")
        return 130                       # a shell's code for SIGINT
    except Exception as err:
        if not user_error(err):
            raise                        # a bug: its traceback is what to report
        where = "" if isinstance(err, OSError) else " (SPANFILL_TRACEBACK=1 shows where)"
        sys.stderr.write(f"spanfill {command}: {err}{where}\n")
        return 1


def user_error(err: Exception) -> bool:
    """An error that bad input explains (a missing or broken file, a model that cannot load, a value
    out of range), so its message is what the user needs, not a traceback. SPANFILL_TRACEBACK=1
    shows the traceback anyway."""
    if os.environ.get("SPANFILL_TRACEBACK"):
        return False
    from spanfill.engine import CheckpointError   # imports torch: only once a command failed
    return isinstance(err, (OSError, ValueError, CheckpointError))


if __name__ == "__main__":
    sys.exit(main())
