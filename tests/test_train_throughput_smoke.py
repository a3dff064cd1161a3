"""benchmarks/train_throughput.py on the tiny preset (eager settings, one step each): every setting
that runs here gets a row with its throughput and utilisation, and `before` is the reference."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import train_throughput  # noqa: E402


def test_train_throughput_measures_each_setting(held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    (held_out_data / "train.jsonl").write_text((held_out_data / "held_out.jsonl").read_text())
    assert train_throughput.main(["--data", str(held_out_data), "--preset", "tiny", "--settings", "0", "1",
                                  "--rounds", "1", "--steps", "1", "--warmup", "1", "--files", "4"]) == 0
    result = json.loads((tmp_path / "train_throughput.json").read_text())
    rows = {r["setting"]: r for r in result["rows"]}
    assert "eager fp32, fixed width" in rows
    for r in rows.values():
        assert r["steps"] == 1 and r["tokens_per_s"] > 0 and 0 < r["mfu"] and 0 <= r["padding"] < 1
    assert "tok/s" in capsys.readouterr().out
