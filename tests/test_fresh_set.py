"""training/fresh.py and benchmarks/fresh_set.py: a judging set of code no model trained on. Its
packages are not the training list's nor installed beside spanfill, and a file that is a copy or a
version of a corpus file is left out."""
import importlib.metadata
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fresh_set  # noqa: E402

from spanfill.engine.training import fresh  # noqa: E402
from spanfill.engine.training.corpus import CorpusFile, read_split, write_split  # noqa: E402
from spanfill.engine.training.packages import DEFAULT_LIST, canonical_name, read_list  # noqa: E402


def module(name: str, functions: int) -> str:
    return "".join(f"def {name}_{i}(value, other):\n    return value.{name}_transform_{i}(other) + {i}\n"
                   for i in range(functions))


def test_the_fresh_packages_are_not_trained_on():
    names = {canonical_name(p.name) for p in read_list(fresh.FRESH_LIST)}
    assert len(names) >= 10
    assert not names & {canonical_name(p.name) for p in read_list(DEFAULT_LIST)}
    installed = {canonical_name(d.metadata["Name"]) for d in importlib.metadata.distributions()}
    assert not names & installed       # the default corpus reads the packages installed beside spanfill


def test_copies_and_versions_of_corpus_files_are_left_out():
    corpus = [CorpusFile("lib/a.py", module("alpha", 40)), CorpusFile("lib/b.py", module("beta", 40))]
    copy = CorpusFile("pkg/a.py", corpus[0].text.replace("\n", "\n\n"))           # the same up to whitespace
    version = CorpusFile("pkg/b.py", module("beta", 40)[:-200] + module("gamma", 5))   # an edited twin
    new = CorpusFile("pkg/c.py", module("delta", 40))
    kept, counts = fresh.fresh_files([copy, version, new], corpus)
    assert [f.path for f in kept] == ["pkg/c.py"]
    assert counts == {"copies": 1, "versions": 1, "kept": 1}


def test_the_set_is_written_from_the_installed_packages(tmp_path, monkeypatch):
    def install(packages, target):       # what pip would leave: each package's source
        for i, p in enumerate(packages[:3]):
            (target / p.name).mkdir(parents=True)
            (target / p.name / "core.py").write_text(module(f"m{i}", 30))
        (target / "copied").mkdir()
        (target / "copied" / "util.py").write_text(module("old", 30))
    monkeypatch.setattr(fresh, "install", install)
    corpus = tmp_path / "data"
    corpus.mkdir()
    write_split(corpus / "train.jsonl", [CorpusFile("lib/util.py", module("old", 30))])
    write_split(corpus / "held_out.jsonl", [])
    out = tmp_path / "fresh"
    assert fresh_set.main(["--out", str(out), "--corpus", str(corpus)]) == 0
    files = read_split(out / "held_out.jsonl")
    assert sorted(Path(f.path).parent.name for f in files) == sorted(p.name for p in read_list(fresh.FRESH_LIST)[:3])
    stats = json.loads((out / "stats.json").read_text())
    assert (stats["read"], stats["copies"], stats["kept"]) == (4, 1, 3)
    assert stats["command"] == f"python benchmarks/fresh_set.py --out {out} --corpus {corpus}"
