"""benchmarks/engine_sweep.py on the shipped model (eager, a few tasks, one span length): every
configuration and the generate() baseline are scored by the one scorer, and the rows add up."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import engine_sweep  # noqa: E402


def test_engine_sweep_scores_every_configuration_and_generate(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(engine_sweep, "RESULTS", tmp_path)
    assert engine_sweep.main(["--model", str(shipped_model), "--data", str(held_out_data), "--tasks", "3",
                              "--spans", "32", "--eager"]) == 0
    result = json.loads((tmp_path / "engine_sweep.json").read_text())
    rows = {(r["name"], r["kind"]): r for r in result["rows"]}
    assert ("transformers generate() L=32", "cold") in rows and ("AR L=32", "warm") in rows
    assert all(r["tasks"] == 3 and 0 <= r["exact_match"] <= 1 and r["tokens_per_s"] > 0
               and r["latency_median_ms"] <= r["latency_p95_ms"] for r in rows.values())
    assert 0 <= result["generate_equals_ar"] <= 1 and (tmp_path / "engine_sweep.png").is_file()
