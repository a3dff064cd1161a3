"""benchmarks/soak.py: a few seconds of the soak and its bounded-resources part against the real
server on the tiny random-weight model, and a check that the result file adds up."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import soak  # noqa: E402


def test_a_short_soak_adds_up(tiny_model, held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert soak.main(["--model", str(tiny_model), "--device", "cpu", "--data", str(held_out_data),
                      "--minutes", "0.1", "--interval-ms", "20", "--sample-s", "1", "--churn-s", "0.5",
                      "--churn-docs", "3", "--max-open", "5", "--many-docs", "40", "--big-mb", "0.2",
                      "--line-mb", "0.1", "--name", "short"]) == 0
    result = json.loads((tmp_path / "results" / "short.json").read_text())
    assert (tmp_path / "results" / "short.png").stat().st_size > 0
    req = result["requests"]
    assert req["sent"] > 0 and req["failed"] == 0 and req["answered"] + req["cancelled"] == req["sent"]
    samples = result["samples"]
    assert len(samples) >= 3 and all(s["rss_mb"] > 0 for s in samples)
    assert samples[-1]["open_documents"] == 0                 # every typed and churned document closed
    assert max(s["open_documents"] for s in samples) <= 5 + 1  # churn keeps --max-open, plus the typed one
    assert set(result["drift"]) >= {"rss_growth_mb", "p50_ms_first_third", "p95_ms_last_third"}
    bounded = result["bounded"]
    assert bounded["many_documents"]["documents"] == 40
    assert bounded["big_document"]["chars"] >= 0.2 * 2**20 and bounded["single_line"]["chars"] >= 0.1 * 2**20 - 1
    for case in ("many_documents", "big_document", "single_line"):
        assert bounded[case]["answered"] == bounded[case]["requests"] > 0
    assert result["server"]["resources"]["openDocuments"] == 0
    assert "latency drift" in capsys.readouterr().out
