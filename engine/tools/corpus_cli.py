"""`spanfill data`: build the training corpus (see corpus.py) and print per-split counts."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..training.corpus import build, default_sources, read_split
from ..training.packages import DEFAULT_LIST, canonical_name, install, installed_licences, read_list
from ..core.tokenizer import Tokenizer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="spanfill data", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("data"))
    ap.add_argument("sources", nargs="*", type=Path,
                    help="directories to read *.py from (default: this interpreter's stdlib and site-packages)")
    ap.add_argument("--exclude", type=Path, action="append", default=[], metavar="HELD_OUT_JSONL",
                    help="another split's held_out.jsonl: its files and their versions stay out of train too")
    ap.add_argument("--count-tokens", type=Path, metavar="TOKENIZER_JSON",
                    help="also count tokens per split with this tokenizer")
    ap.add_argument("--packages", action="store_true",
                    help="also the source of a pinned list of packages, installed by pip without their tests")
    ap.add_argument("--packages-list", type=Path, default=None, metavar="LIST",
                    help=f"with --packages: the list (default: {DEFAULT_LIST.name} beside the corpus code)")
    ap.add_argument("--packages-dir", type=Path, default=None, metavar="DIR",
                    help="with --packages: the corpus folder they are installed into (default: OUT/packages)")
    args = ap.parse_args(argv)
    missing = [s for s in args.sources if not s.is_dir()]
    if missing:
        print(f"spanfill data: not a directory: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    if not args.packages and (args.packages_list or args.packages_dir):
        print("spanfill data: --packages-list and --packages-dir go with --packages", file=sys.stderr)
        return 2
    tok = None
    if args.count_tokens:    # read before the build: a wrong path was found after it, with a traceback
        try:
            tok = Tokenizer.from_file(args.count_tokens)
        except Exception as e:   # tokenizers raises a bare Exception for a missing or broken file
            print(f"spanfill data: --count-tokens {args.count_tokens}: not a tokenizer.json ({e})", file=sys.stderr)
            return 2
    try:
        exclude = [f for path in args.exclude for f in read_split(path)]
        sources = args.sources or default_sources()
        listed, folder = [], args.packages_dir or args.out / "packages"
        if args.packages:
            listed = read_list(args.packages_list or DEFAULT_LIST)
            install(listed, folder)
            sources = [*sources, folder]
    except (OSError, ValueError, RuntimeError) as e:
        print(f"spanfill data: {e}", file=sys.stderr)
        return 1 if isinstance(e, RuntimeError) else 2
    stats = build(args.out, sources, exclude)
    if listed:
        found = installed_licences(folder)
        stats["packages"] = [{"requirement": p.requirement, "licence": p.licence,
                              "metadata": found.get(canonical_name(p.name), "not installed")} for p in listed]
    if tok is not None:
        for split, name in (("train", "train.jsonl"), ("held_out", "held_out.jsonl")):
            stats[split]["tokens"] = sum(len(ids) for ids in tok.encode_batch([f.text for f in read_split(args.out / name)]))
    if listed or args.count_tokens:     # build() wrote the counts alone
        (args.out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    print(json.dumps(stats, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
