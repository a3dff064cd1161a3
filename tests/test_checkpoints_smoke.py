"""benchmarks/checkpoints.py (eager, a few tasks): every model completes every task, each later model
is paired task by task with the first, and the same weights under two names tie on every task."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import checkpoints  # noqa: E402
import common  # noqa: E402


def test_the_same_weights_tie_and_another_model_is_paired(shipped_model, tiny_model, held_out_data, tmp_path,
                                                          monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    models = ["shipped", str(shipped_model), str(tiny_model)]
    assert checkpoints.main(["--models", *models, "--data", str(held_out_data), "--single", "4", "--multi", "2",
                             "--eager"]) == 0
    result = json.loads((tmp_path / "checkpoints.json").read_text())
    rows = {(r["kind"], r["model"]): r for r in result["rows"]}
    assert set(rows) == {(k, m) for k in ("single", "multi") for m in models}
    for kind in ("single", "multi"):
        assert {rows[(kind, m)]["tasks"] for m in models} == {result["tasks"][kind]}
        assert "vs_first" not in rows[(kind, "shipped")]
        same = rows[(kind, str(shipped_model))]
        assert same["vs_first"] == {"won": 0, "lost": 0, "es_diff": 0.0, "es_diff_se": 0.0, "sign_test_p": 1.0}
        assert same["shown_exact_match"] == rows[(kind, "shipped")]["shown_exact_match"]
        assert set(rows[(kind, str(tiny_model))]["vs_first"]) == {"won", "lost", "es_diff", "es_diff_se", "sign_test_p"}
    assert "vs shipped: EM" in capsys.readouterr().out


def test_one_model_is_refused(held_out_data):
    with pytest.raises(SystemExit):
        checkpoints.main(["--models", "shipped", "--data", str(held_out_data)])


@pytest.mark.parametrize("won, lost, p", [(0, 0, 1.0), (5, 5, 1.0), (10, 0, 2 / 1024), (0, 10, 2 / 1024),
                                          (1, 0, 1.0), (9, 1, 22 / 1024)])
def test_sign_test(won, lost, p):
    assert checkpoints.sign_test(won, lost) == pytest.approx(p)


def test_a_git_revision_names_the_default_model_as_the_repository_held_it(shipped_model):
    """`git:REV` reads the default model's files at REV: at HEAD, what git holds for them."""
    import subprocess
    directory = Path(checkpoints.model_dir("git:HEAD"))
    for name in checkpoints.MODEL_FILES:
        held = subprocess.run(["git", "show", f"HEAD:engine/default_model/{name}"], cwd=checkpoints.REPO,
                              capture_output=True, check=True).stdout
        assert (directory / name).read_bytes() == held
    assert checkpoints.model_dir("shipped") is None and checkpoints.model_dir("/some/dir") == "/some/dir"
    with pytest.raises(SystemExit, match="name a revision of this repository"):
        checkpoints.model_dir("git:no-such-revision")


def test_fresh_tasks_are_those_a_larger_build_adds(shipped_model, held_out_data):
    """--fresh-after S M: tasks beyond those a run with --single S --multi M decodes, none of them shared."""
    from spanfill.engine import Tokenizer, build_tasks, read_split
    files, tok = read_split(held_out_data / "held_out.jsonl"), Tokenizer.from_file(shipped_model / "tokenizer.json")
    first = build_tasks(files, 4, 2, tok, 32)
    fresh = common.fresh_tasks(files, 4, 2, (4, 2), tok, 32)
    larger = build_tasks(files, 8, 4, tok, 32)
    key = common.task_key
    assert fresh and {key(t) for t in fresh} <= {key(t) for t in larger}
    assert not {key(t) for t in fresh} & {key(t) for t in first}
    assert {t.kind for t in fresh} == {"single", "multi"}


def test_fresh_after_decodes_only_the_fresh_tasks(shipped_model, held_out_data, tmp_path, monkeypatch):
    from spanfill.engine import Tokenizer, read_split
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert checkpoints.main(["--models", "shipped", str(shipped_model), "--data", str(held_out_data),
                             "--single", "4", "--multi", "2", "--eager", "--fresh-after", "4", "2"]) == 0
    fresh = common.fresh_tasks(read_split(held_out_data / "held_out.jsonl"), 4, 2, (4, 2),
                               Tokenizer.from_file(shipped_model / "tokenizer.json"), 32)
    counts = json.loads((tmp_path / "checkpoints.json").read_text())["tasks"]
    assert counts == {kind: sum(t.kind == kind for t in fresh) for kind in ("single", "multi")}
