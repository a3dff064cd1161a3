"""benchmarks/replay.py: what it types, how it tells cache answers apart, and a short run of the
real server on the tiny random-weight model that checks the result file adds up."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import replay  # noqa: E402

SOURCE = '''import os


def sizes(paths):
    """Map each existing path to its size."""
    out = {}
    for path in paths:
        if os.path.exists(path):
            out[path] = os.path.getsize(path)
    return out


def greet(name):
    text = f"hello {name} 😀"
    text = text.strip()
    return text.upper()


def total(values):
    result = 0
    for v in values:
        result += v
    return result


def one_liner(x): return x
'''


def test_bodies_skip_the_docstring_and_enter_brings_the_indentation():
    bodies = replay.function_bodies(SOURCE, "m.py")
    assert [b.line for b in bodies] == [6, 14, 20]
    first = bodies[0]
    assert SOURCE[first.start:].startswith("out = {}")
    assert first.keystrokes(SOURCE)[8:10] == ["\n    ", "f"]
    assert "".join(first.keystrokes(SOURCE)) == SOURCE[first.start:first.end]


def test_a_short_replay_adds_up(tiny_model, tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "held_out.jsonl").write_text(json.dumps({"path": "pkg/m.py", "text": SOURCE}) + "\n")
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert replay.main(["--model", str(tiny_model), "--device", "cpu", "--data", str(data), "--files", "1",
                        "--max-keys", "20", "--interval-ms", "30", "--threads", "1", "--background-load", "1",
                        "--name", "busy"]) == 0
    result = json.loads((tmp_path / "results" / "busy.json").read_text())
    assert (tmp_path / "results" / "busy.png").stat().st_size > 0
    assert result["threads"] == 1 and result["config"]["background_load"] == 1
    req = result["requests"]
    assert req["sent"] == 20 == sum(r["keys"] for r in result["regions"]) and len(result["regions"]) == 3
    assert req["answered"] + req["cancelled"] == req["sent"] and req["failed"] == 0
    assert req["answered"] >= 3                          # the last keystroke of each body is never cancelled
    lat = result["latency_ms"]
    assert lat["count"] == req["answered"] == len(result["latency_samples_ms"]) == len(result["sources"])
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"]
    server = result["server"]
    assert server["requests"] == req["sent"]
    assert server["cancelled"] <= req["cancelled"] and server["cacheHits"] >= result["typing_through"]["answered_from_cache"]
    assert {"contextReuseRate", "superseded", "latencyMs", "cacheHitRate"} <= server.keys()
    # where the engine's time went, stage by stage, for every engine call the server made
    stages = server["engineStagesMs"]
    always = {"window", "tokenize", "prefill", "decode"}     # the check and the fallback: where they ran
    assert always <= set(stages) <= always | {"check", "fallback"} and server["engineCalls"] > 0
    assert all(stages[name]["count"] == server["engineCalls"] for name in always)
    assert all(stages[name]["count"] <= server["engineCalls"] for name in set(stages) - always)
    assert stages["decode"]["p50"] > 0
    assert "round trip (ms)" in capsys.readouterr().out


def test_busy_processes_spin_while_open_and_are_gone_after():
    with replay.BusyProcesses(2) as busy:
        assert len(busy.procs) == 2 and all(p.poll() is None for p in busy.procs)
    assert all(p.returncode is not None for p in busy.procs)
