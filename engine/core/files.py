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
