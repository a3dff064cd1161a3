"""benchmarks/protocol_rtt.py: a short run of two real servers on the tiny random-weight model, one
reading stdin on the event loop and one on pygls's thread; the result file adds up and renders."""
import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import protocol_rtt  # noqa: E402
from pygls.io_ import StdinAsyncReader  # noqa: E402
from report_replay import protocol_rtt_section  # noqa: E402

from spanfill.server import streams  # noqa: E402


def test_a_short_run_adds_up_and_renders(tiny_model, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    assert protocol_rtt.main(["--model", str(tiny_model), "--rounds", "2", "--per-round", "3"]) == 0
    result = json.loads((tmp_path / "results" / "protocol_rtt.json").read_text())
    assert set(result["readers"]) == {"event loop", "thread"}
    for kinds in result["readers"].values():
        assert set(kinds) == {"status", "keystroke"}
        assert all(s["runs"] == 6 and 0 < s["median_ms"] <= s["p95_ms"] for s in kinds.values())
    text = "\n".join(protocol_rtt_section(result, "today; "))
    assert "| event loop |" in text and "| thread |" in text and "2 rounds" in text


def test_the_baseline_script_has_even_a_pipe_read_on_a_thread(monkeypatch):
    """The second server runs pygls's threaded reader: its script makes every stdin look like a file."""
    monkeypatch.setattr(streams, "waitable", streams.waitable)       # restored after the test
    exec(protocol_rtt.THREADED.split("serve.main")[0], {})
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe, os.fdopen(write_end, "wb"):
        assert isinstance(asyncio.run(streams.stdin_reader(pipe, None)), StdinAsyncReader)
