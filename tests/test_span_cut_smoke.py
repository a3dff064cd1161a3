"""benchmarks/span_cut.py on the shipped model (a few tasks): every setting decodes every task and the
result file adds up."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import span_cut  # noqa: E402

from spanfill.engine.decoding.length import SHRINK_TO  # noqa: E402


def test_span_cut_compares_the_settings_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert span_cut.main(["--model", str(shipped_model), "--data", str(held_out_data), "--single", "4", "--multi", "2"]) == 0
    result = json.loads((tmp_path / "span_cut.json").read_text())
    rows = {(r["kind"], r["setting"]): r for r in result["rows"]}
    assert set(rows) == {(k, s) for k in ("single", "multi") for s in ("cut", "whole", "default")}
    for kind in ("single", "multi"):
        assert rows[kind, "cut"]["tasks"] == rows[kind, "whole"]["tasks"] == rows[kind, "default"]["tasks"] > 0
    assert all(0 < r["latency_median_ms"] <= r["latency_p95_ms"] and 1 <= r["forward_passes_mean"] <= 4
               for r in rows.values())
    assert result["cut_to"] == sorted(SHRINK_TO, reverse=True) and result["single_line_span"] == 16
    assert "cut" in capsys.readouterr().out
