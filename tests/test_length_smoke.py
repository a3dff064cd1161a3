"""benchmarks/length.py on the shipped model (eager, a few tasks): every strategy and the AR
baseline decode every task, and the result file holds a row per strategy and kind."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import length  # noqa: E402

from spanfill.engine import LENGTHS  # noqa: E402


def test_length_compares_every_strategy_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert length.main(["--model", str(shipped_model), "--data", str(held_out_data), "--single", "3", "--multi", "2",
                        "--eager"]) == 0
    result = json.loads((tmp_path / "length.json").read_text())
    rows = {(r["kind"], r["mode"], r["length"]): r for r in result["rows"]}
    # every strategy; without a length head not `head`, and not `auto` (then the same as `pad`)
    has_head = json.loads((Path(shipped_model) / "config.json").read_text()).get("length_classes", 0) > 0
    names = [name for name in LENGTHS if has_head or name not in ("head", "auto")]
    wanted = {(k, "diffusion", name) for k in ("single", "multi") for name in names} | {(k, "ar", None) for k in ("single", "multi")}
    assert set(rows) == wanted
    for kind in ("single", "multi"):
        assert len({rows[key]["tasks"] for key in wanted if key[0] == kind}) == 1
        assert len({rows[key]["reference_chars_mean"] for key in wanted if key[0] == kind}) == 1
    assert all(r["shown_chars_mean"] >= 0 and 0 < r["latency_median_ms"] <= r["latency_p95_ms"] for r in rows.values())
    assert "first-step" in capsys.readouterr().out
