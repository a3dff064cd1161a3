"""Corpus packages: the source of a fixed, named list of widely used open-source Python packages
(packages.txt: pinned, each with its licence), installed by pip into a corpus folder and read beside
the default sources, so that training does not run many epochs over one interpreter's files.

    spanfill data --out /work/data2 --packages --exclude /work/data/held_out.jsonl

Each package comes without its dependencies (`--no-deps`: they are on the list or not taken) and
without its tests (`tests/`, `test/` and `testsuite/` folders, `test_*.py`, `tests.py`, `conftest.py`),
from wheels only (no package's build code runs): the corpus holds what a package ships as its code.
The folder remembers the list it holds, so a rebuild reuses it. The split rule is unchanged (a hash
of each file's text), so a corpus with the packages keeps every held-out file of one without them
out of train; `--exclude` also keeps their versions out, and held-out evaluation stays comparable on
the smaller corpus's held-out split.
"""
from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_LIST = Path(__file__).with_name("packages.txt")
MARKER = ".spanfill-packages"       # in the corpus folder: what it holds (or was being filled with)
PENDING = "installing\n"             # the marker's first line until pip and the test pruning are done
TEST_DIRS = {"tests", "test", "testsuite"}
TEST_FILE = re.compile(r"(test_.*|tests|conftest)\.py$", re.IGNORECASE)
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.+!_-]+)(?:\s+#\s*(?P<licence>\S.*))?$")


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    licence: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()      # a package name as pip compares names


def read_list(path: Path = DEFAULT_LIST) -> list[Package]:
    """The packages a list names. Every line is `name==version  # licence` (blank lines and lines
    starting with `#` aside): a corpus is only reproducible from pinned versions, and only usable
    with known licences."""
    packages, seen = [], set()
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"{path}:{number}: {line!r} is not `name==version  # licence` (pin the version)")
        if m["licence"] is None:
            raise ValueError(f"{path}:{number}: {line!r} names no licence (add `  # LICENCE` after the version)")
        key = canonical_name(m["name"])
        if key in seen:
            raise ValueError(f"{path}:{number}: {m['name']} is listed twice")
        seen.add(key)
        packages.append(Package(m["name"], m["version"], m["licence"].strip()))
    if not packages:
        raise ValueError(f"{path} names no package")
    return packages


def drop_tests(root: Path) -> int:
    """Delete every test folder and test file under `root`; the number of .py files deleted. Not
    `*_test.py`: there it names source as often as tests (scipy.stats' `_page_trend_test.py`)."""
    dropped = 0
    for folder, dirs, files in os.walk(root):
        for name in [d for d in dirs if d.lower() in TEST_DIRS]:
            dropped += sum(1 for _ in Path(folder, name).rglob("*.py"))
            shutil.rmtree(Path(folder, name))
            dirs.remove(name)         # not walked into: it is gone
        for name in filter(TEST_FILE.match, files):
            dropped += 1
            Path(folder, name).unlink()
    return dropped


def install(packages: list[Package], target: Path, pip: list[str] | None = None) -> bool:
    """The packages' source in `target`, installed by pip unless `target` already holds exactly this
    list for this Python; True where pip ran. `pip`: the command that runs pip (this interpreter's by
    default). A folder is only ever emptied when it is one of these (its marker) or empty: a folder
    named by mistake is refused, not deleted."""
    target = Path(target)
    # wheels differ by Python version, and the test pruning is part of what the folder holds
    wanted = (f"python {sys.version_info.major}.{sys.version_info.minor}; tests dropped: {sorted(TEST_DIRS)} "
              f"{TEST_FILE.pattern}\n" + "".join(p.requirement + "\n" for p in packages))
    marker = target / MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8") == wanted:
        return False
    if target.exists():
        if not target.is_dir() or (any(target.iterdir()) and not marker.is_file()):
            raise RuntimeError(f"{target} is not a corpus packages folder (it has no {MARKER}) and is not empty: "
                               f"name a new or empty folder")
        shutil.rmtree(target)     # another list, or an interrupted install: start clean
    target.mkdir(parents=True)
    marker.write_text(PENDING + wanted, encoding="utf-8")
    # wheels only: no package's build code runs, and what is read is what the package ships
    command = [*(pip or [sys.executable, "-m", "pip"]), "install", "--no-deps", "--no-compile", "--only-binary=:all:",
               "--disable-pip-version-check", "--target", str(target), *(p.requirement for p in packages)]
    done = subprocess.run(command)
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install the corpus packages into {target} (exit {done.returncode}); "
                           f"its output is above. Check the registry is reachable, or fix the list")
    dropped = drop_tests(target)
    print(f"corpus packages: {len(packages)} installed into {target}, {dropped} test files dropped", file=sys.stderr)
    marker.write_text(wanted, encoding="utf-8")
    return True


def installed_licences(target: Path) -> dict[str, str]:
    """canonical name -> the licence each installed package's metadata states (License-Expression, else
    License, else its licence classifiers): recorded with the corpus to check the list's comments against."""
    found = {}
    for metadata in sorted(Path(target).glob("*.dist-info/METADATA")):
        meta = email.parser.Parser().parsestr(metadata.read_text(encoding="utf-8", errors="replace"), headersonly=True)
        licence = meta.get("License-Expression") or (meta.get("License") or "").strip()
        # none, or a whole licence text: the classifiers say which
        if licence.upper() in ("", "UNKNOWN") or "\n" in licence or len(licence) > 80:
            licence = "; ".join(c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                                if c.startswith("License ::"))
        found[canonical_name(meta.get("Name", metadata.parent.name))] = licence or "unknown"
    return found
