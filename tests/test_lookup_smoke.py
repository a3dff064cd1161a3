"""benchmarks/lookup.py on the shipped model (eager, a few tasks): lookup on and off decode every task in
both modes, the result file holds a row per kind and mode with the paired comparison, and the engine's
proposals per pass are recorded."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import lookup  # noqa: E402



def test_lookup_benchmark_compares_on_and_off_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert lookup.main(["--model", str(shipped_model), "--data", str(held_out_data), "--single", "3", "--multi", "2",
                        "--eager", "--threads", "1"]) == 0
    result = json.loads((tmp_path / "lookup.json").read_text())
    rows = {(r["kind"], r["mode"]): r for r in result["rows"]}
    assert set(rows) == {(k, m) for k in ("single", "multi") for m in ("default", "ar")}
    for (kind, _), row in rows.items():
        assert row["tasks"] == result["tasks"][kind]
        assert len(row["p50_ms"]) == len(row["passes"]) == len(row["exact_match"]) == 2
        assert set(row["vs_off"]) == {"won", "lost", "es_diff", "es_diff_se"}
    assert result["lookup_tokens"] > 0
    # AR mode writes the same greedy middles either way, in no more passes with lookup
    assert rows[("multi", "ar")]["passes"][0] <= rows[("multi", "ar")]["passes"][1]
