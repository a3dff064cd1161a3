"""benchmarks/check.py on the shipped model (eager, a few tasks): every acceptance, the unchecked draft
and AR decode every task, and the result file holds a row per setting and kind with the paired
comparisons; an ACCEPTANCE:T[:L] setting drafts in T steps (on a span of L)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import check  # noqa: E402
import common  # noqa: E402


def test_check_compares_every_acceptance_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert check.main(["--model", str(shipped_model), "--data", str(held_out_data), "--single", "3", "--multi", "2",
                       "--eager", "--checks", "auto", "none", "0.1", "1", "0.1:1", "0.1:1:8"]) == 0
    result = json.loads((tmp_path / "check.json").read_text())
    rows = {(r["kind"], r["setting"]): r for r in result["rows"]}
    settings = ("auto", "none", "0.1", "1", "0.1:1", "0.1:1:8", "ar")
    assert set(rows) == {(k, s) for k in ("single", "multi") for s in settings}
    for kind in ("single", "multi"):
        assert {rows[(kind, s)]["tasks"] for s in settings} == {result["tasks"][kind]}
        assert rows[(kind, "0.1:1")]["steps"] == 1 and rows[(kind, "0.1")]["steps"] == 4
        assert rows[(kind, "0.1:1:8")]["span_length"] == 8 and rows[(kind, "0.1:1")]["span_length"] is None
        assert rows[(kind, "auto")]["steps"] is None and "vs_unchecked" in rows[(kind, "auto")]
        assert rows[(kind, "none")]["kept_tokens_mean"] == 0 and "vs_unchecked" not in rows[(kind, "none")]
        assert set(rows[(kind, "0.1")]["vs_unchecked"]) == {"won", "lost", "es_diff", "es_diff_se"}
        assert "vs_ar" in rows[(kind, "0.1")] and "vs_ar" not in rows[(kind, "ar")]
    out = capsys.readouterr().out
    assert "auto (default)" in out and "check 0.1 " in out and "check 0.1 T=1 " in out and "check 0.1 T=1 L=8" in out
