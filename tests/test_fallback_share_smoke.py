"""benchmarks/fallback_share.py on the shipped model (eager, a few tasks): every share and AR decode
every task, rows per split and over all, the requests that fell back per share, and the report
renders them."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import fallback_share  # noqa: E402
from report_sections import fallback_share_section  # noqa: E402


def test_fallback_share_compares_shares_and_ar_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    assert fallback_share.main(["--model", str(shipped_model), "--data", str(held_out_data), "--multi", "3",
                                "--shares", "0", "1", "--eager"]) == 0
    result = json.loads((tmp_path / "results" / "fallback_share.json").read_text())
    rows = {(r["split"], r["mode"], r["share"]): r for r in result["rows"]}
    settings = (("diffusion", 0.0), ("diffusion", 1.0), ("ar", None))
    assert set(rows) == {(s, m, v) for s in ("all", str(held_out_data)) for m, v in settings}
    assert len({r["tasks"] for r in rows.values()}) == 1 and rows[("all", "ar", None)]["tasks"] > 0
    # per share, how many of the tasks fell back (share 1: wherever the rules cut anything)
    assert set(result["fell_back"]) == {"0.0", "1.0"}
    assert all(0 <= n <= rows[("all", "ar", None)]["tasks"] for n in result["fell_back"].values())
    assert rows[("all", "diffusion", 0.0)]["vs_first"]["es_diff"] == 0
    text = "\n".join(fallback_share_section(result, "today; "))
    assert f"| all | 1 | {rows[('all', 'ar', None)]['tasks']} |" in text and "vs 0" in text and "per share: 0: " in text
