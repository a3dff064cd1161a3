"""benchmarks/int8.py on the shipped model (eager, a few tasks): fp32 and int8 decode every task in
both modes, the result file adds up, and report_sections.py renders its table."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import int8  # noqa: E402
import report_sections  # noqa: E402


def test_int8_benchmark_compares_fp32_and_int8_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert int8.main(["--model", str(shipped_model), "--data", str(held_out_data), "--single", "4", "--multi", "2"]) == 0
    result = json.loads((tmp_path / "int8.json").read_text())
    rows = {(r["kind"], r["mode"], r["dtype"]): r for r in result["rows"]}
    assert set(rows) == {(k, m, d) for k in ("single", "multi") for m in ("diffusion", "ar") for d in ("fp32", "int8")}
    for kind in ("single", "multi"):
        assert rows[kind, "ar", "fp32"]["tasks"] == rows[kind, "diffusion", "int8"]["tasks"] > 0
    assert all(0 < r["latency_median_ms"] <= r["latency_p95_ms"] for r in rows.values())
    assert result["engines"]["int8"]["int8_matmuls"] and not result["engines"]["fp32"]["int8_matmuls"]
    assert "int8" in capsys.readouterr().out
    text = "\n".join(report_sections.int8_section(result))
    assert "**int8 matmuls**" in text and "| single-line | T=4 | int8 |" in text
