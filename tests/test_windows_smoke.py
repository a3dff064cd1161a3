"""benchmarks/windows.py on the shipped model (a few tasks): every share completes every task, a smaller
share sends a context no longer than a larger one's, and the pairing against the last share adds up."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import report_sections  # noqa: E402
import windows  # noqa: E402


def test_windows_compares_shares_of_the_budget_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert windows.main(["--model", str(shipped_model), "--data", str(held_out_data), "--single", "4", "--multi", "2",
                         "--eager", "--shares", "0.3", "1"]) == 0
    result = json.loads((tmp_path / "windows.json").read_text())
    rows = {(r["kind"], r["share"]): r for r in result["rows"]}
    assert set(rows) == {(k, s) for k in ("single", "multi") for s in (0.3, 1.0)}
    for kind in ("single", "multi"):
        small, full = rows[kind, 0.3], rows[kind, 1.0]
        assert small["tasks"] == full["tasks"] > 0
        assert small["context_tokens_mean"] < full["context_tokens_mean"]
        vs = small["against_last"]
        assert "against_last" not in full and vs["won"] + vs["lost"] <= small["tasks"]
        assert vs["won"] - vs["lost"] == round((full["shown_exact_match"] - small["shown_exact_match"]) * small["tasks"])
    section = "\n".join(report_sections.windows_section(result))
    assert "| single-line | 30% |" in section and "vs 100%" in section


def test_shares_outside_the_budget_are_refused(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    with pytest.raises(SystemExit):
        windows.main(["--model", str(shipped_model), "--data", str(held_out_data), "--shares", "0.5", "1.5"])
