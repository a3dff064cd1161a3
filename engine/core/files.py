"""Files written whole: a reader never finds half of one."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """write(PATH.partial, beside `path`), then that file takes `path`'s name; a write that fails or is
    interrupted (Ctrl-C) leaves `path` as it was and no .partial behind."""
    partial = path.with_name(path.name + ".partial")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def unwritable(path: Path, make_folders: bool = False) -> str | None:
    """Why `path` cannot be written as a file (None: it can be, as far as can be told before a long
    run): it is a folder, or its folder is missing (make_folders: one of the folders to make is a file)."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder, not a file"
    if not make_folders:
        return None if path.parent.is_dir() else f"the folder {path.parent} does not exist"
    above = path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    return None if above.is_dir() else f"{above} is a file, not a folder {path} could be written in"
