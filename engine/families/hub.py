"""A Hugging Face hub id ("org/name") resolved to a directory in the local Hugging Face cache, offline.

The cache is where `hf download` / `huggingface-cli download` and transformers put a repository
(huggingface_hub's order): $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
$XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub, as
models--org--name/snapshots/<revision>/, with refs/main naming the revision. Nothing is downloaded
unless the caller asks (`download=True`, which needs huggingface_hub and the network) — then only
safetensors, JSON and tokenizer text files are fetched, never pickles or code.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..core.checkpoint import CheckpointError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# what a checkpoint needs; *.py (remote code) and *.bin (pickles) are never fetched
DOWNLOAD_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.jinja", "*.model"]


def looks_like_hub_id(name: str) -> bool:
    """`owner/name`, and no local path: not a folder, nor one that a save stopped between its two
    renames left as `name.tmp` or `name.old` (spanfill's loader puts it back)."""
    return bool(HUB_ID.match(name)) and not any(Path(name + tail).exists() for tail in ("", ".tmp", ".old"))


def hub_cache() -> Path:
    def env(name: str) -> Path | None:
        value = os.environ.get(name)
        return Path(os.path.expandvars(value)).expanduser() if value else None
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if (cache := env(name)) is not None:
            return cache
    home = env("HF_HOME") or (env("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface"
    return home / "hub"


def cached_snapshot(repo_id: str, cache: Path | None = None) -> Path | None:
    """The snapshot refs/main points at, else the most recently written one; None if not cached."""
    root = (cache or hub_cache()) / ("models--" + repo_id.replace("/", "--"))
    snapshots = root / "snapshots"
    ref = root / "refs" / "main"
    if ref.is_file():
        snapshot = snapshots / ref.read_text().strip()
        if snapshot.is_dir():
            return snapshot
    candidates = sorted((p for p in snapshots.glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
    return candidates[-1] if candidates else None


def resolve(repo_id: str, download: bool = False) -> Path:
    """The local directory for `repo_id`; with download=True, fetched first if it is not cached."""
    found = cached_snapshot(repo_id)
    if found is not None:
        return found
    if download:
        try:
            from huggingface_hub import snapshot_download
        except ImportError as err:
            raise CheckpointError(f"cannot download {repo_id}: huggingface_hub is not installed") from err
        try:
            return Path(snapshot_download(repo_id, allow_patterns=DOWNLOAD_PATTERNS))
        except Exception as err:   # network, authentication, unknown repository
            raise CheckpointError(f"downloading {repo_id} failed ({err})") from err
    raise CheckpointError(
        f"model {repo_id}: no such directory, and not in the local Hugging Face cache ({hub_cache()}); download it first "
        f"(hf download {repo_id} --include '*.json' '*.safetensors' '*.txt') or pass its directory")
