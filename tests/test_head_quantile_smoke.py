"""benchmarks/head_quantile.py on the shipped model (eager, a few tasks of two splits): every quantile
and AR decode every task, rows per split and over all, paired against the first quantile and AR, and
the report renders them."""
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import head_quantile  # noqa: E402
from report_sections import head_quantile_section  # noqa: E402


def test_head_quantile_compares_quantiles_and_ar_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    second = tmp_path / "data2"
    shutil.copytree(held_out_data, second)
    assert head_quantile.main(["--model", str(shipped_model), "--data", str(held_out_data), str(second),
                               "--multi", "2", "--quantiles", "0.2", "0.6", "--eager"]) == 0
    result = json.loads((tmp_path / "results" / "head_quantile.json").read_text())
    rows = {(r["split"], r["mode"], r["quantile"]): r for r in result["rows"]}
    splits = ("all", str(held_out_data), str(second))
    assert set(rows) == {(s, m, q) for s in splits for m, q in (("head", 0.2), ("head", 0.6), ("ar", None))}
    assert all(rows[("all", m, q)]["tasks"] == 4 and rows[(str(second), m, q)]["tasks"] == 2
               for m, q in (("head", 0.2), ("head", 0.6), ("ar", None)))
    for s in splits:
        first, ar = rows[(s, "head", 0.2)], rows[(s, "ar", None)]
        assert first["vs_first"]["es_diff"] == 0 and ar["vs_ar"]["es_diff"] == 0
        assert ar["vs_first"]["es_diff"] == -first["vs_ar"]["es_diff"]
    # the same files in both splits: the same tasks and the same greedy answers
    assert rows[(str(held_out_data), "ar", None)]["shown_edit_similarity"] == rows[(str(second), "ar", None)]["shown_edit_similarity"]
    text = "\n".join(head_quantile_section(result, "today; "))
    assert "| all | 0.6 | 4 |" in text and "vs 0.2" in text


def test_after_compares_only_the_tasks_beyond_the_first(shipped_model, held_out_data, tmp_path, monkeypatch):
    """--after M: each split's multi-line tasks beyond its first M, none of those."""
    from spanfill.engine import Tokenizer, read_split
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    files, tok = read_split(held_out_data / "held_out.jsonl"), Tokenizer.from_file(shipped_model / "tokenizer.json")
    first, beyond = common.fresh_tasks(files, 0, 2, (0, 0), tok, 32), common.fresh_tasks(files, 0, 2, (0, 2), tok, 32)
    assert beyond and not {common.task_key(t) for t in beyond} & {common.task_key(t) for t in first}
    decoded, score = [], head_quantile.score

    def recording(engine, task, **kw):
        decoded.append(common.task_key(task))
        return score(engine, task, **kw)
    monkeypatch.setattr(head_quantile, "score", recording)
    assert head_quantile.main(["--model", str(shipped_model), "--data", str(held_out_data), "--multi", "2",
                               "--after", "2", "--quantiles", "0.5", "--eager"]) == 0
    result = json.loads((tmp_path / "results" / "head_quantile.json").read_text())
    assert {r["tasks"] for r in result["rows"]} == {len(beyond)}
    assert set(decoded) == {common.task_key(t) for t in beyond}
