"""benchmarks/protocol_rtt.py: a short run of two real servers on the tiny random-weight model, one
reading stdin on the event loop and one on pygls's thread (the benchmark checks each server's log
says so); the result file adds up and renders."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import protocol_rtt  # noqa: E402
from report_replay import protocol_rtt_section  # noqa: E402


def test_a_short_run_adds_up_and_renders(tiny_model, tmp_path, monkeypatch):
    """The run also stops short if a server read stdin otherwise than meant (reader_logged)."""
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    assert protocol_rtt.main(["--model", str(tiny_model), "--rounds", "2", "--per-round", "3"]) == 0
    result = json.loads((tmp_path / "results" / "protocol_rtt.json").read_text())
    assert set(result["readers"]) == {"event loop", "thread"}
    for kinds in result["readers"].values():
        assert set(kinds) == {"status", "keystroke"}
        assert all(s["runs"] == 6 and 0 < s["median_ms"] <= s["p95_ms"] for s in kinds.values())
    text = "\n".join(protocol_rtt_section(result, "today; "))
    assert "| event loop |" in text and "| thread |" in text and "2 rounds" in text


def test_which_reader_a_server_used_comes_from_its_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("x INFO spanfill.server.lsp: reading stdin on a thread\n")
    assert protocol_rtt.reader_logged(log) == "thread"
    log.write_text("x INFO spanfill.server.lsp: reading stdin on the event loop\n")
    assert protocol_rtt.reader_logged(log) == "event loop"
    log.write_text("")
    assert protocol_rtt.reader_logged(log) is None
