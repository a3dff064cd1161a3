"""A judging set no spanfill model has trained on: the source of the pinned packages of
fresh_packages.txt (none is in packages.txt or installed beside spanfill, whose site-packages the
default corpus reads), installed by pip without their tests and cleaned as the corpus is (`collect`),
less every file that is, or is a version of (`version_pairs`), a file of the named corpus builds,
either split. The corpus's own held-out split is a few hundred files, and checkpoints judged one after
another on tasks beyond those earlier choices saw run out of them; this set is code from elsewhere.
benchmarks/fresh_set.py runs it.
"""
from __future__ import annotations

import json
from pathlib import Path

from .corpus import CorpusFile, collect, normalised_hash, read_split, version_pairs, write_split
from .packages import canonical_name, install, installed_licences, read_list

FRESH_LIST = Path(__file__).with_name("fresh_packages.txt")


def fresh_files(files: list[CorpusFile], corpus: list[CorpusFile]) -> tuple[list[CorpusFile], dict]:
    """The files that are neither a copy (up to whitespace) nor a version of a corpus file, and the counts."""
    seen = {normalised_hash(f.text.encode("utf-8", "surrogatepass")) for f in corpus}
    copies = {i for i, f in enumerate(files) if normalised_hash(f.text.encode("utf-8", "surrogatepass")) in seen}
    versions = {i for _, i in version_pairs(corpus, files)} - copies
    kept = [f for i, f in enumerate(files) if i not in copies and i not in versions]
    return kept, {"copies": len(copies), "versions": len(versions), "kept": len(kept)}


def build_fresh_set(out: Path, corpus_builds: list[Path], package_list: Path = FRESH_LIST,
                    command: str | None = None) -> dict:
    """Write out/held_out.jsonl (what every benchmark's --data reads) and out/stats.json (with the
    `command` that built it, where given); the packages stay in out/packages. Returns the stats."""
    out = Path(out)
    packages = read_list(package_list)
    target = out / "packages"
    install(packages, target)
    train, held, collected = collect([target])
    corpus = [f for build in corpus_builds for split in ("train.jsonl", "held_out.jsonl")
              for f in read_split(Path(build) / split)]
    kept, counts = fresh_files(train + held, corpus)
    write_split(out / "held_out.jsonl", kept)
    licences = installed_licences(target)
    stats = {"packages": {p.requirement: licences.get(canonical_name(p.name), "unknown") for p in packages},
             "rejected": collected["rejected"], "read": len(train) + len(held),
             "corpus": [str(c) for c in corpus_builds], "corpus_files": len(corpus), **counts,
             "bytes": sum(len(f.text.encode("utf-8", "surrogatepass")) for f in kept),
             **({"command": command} if command else {})}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return stats
