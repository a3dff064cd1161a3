"""`make run` runs `spanfill demo`: a headless session that types into examples/inventory.py."""
import subprocess
import sys

from lsp_helpers import CONFIG


def test_demo_prints_completions_with_latencies(e2e_model):
    proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "demo", "--model", str(e2e_model),
                           "--device", "cpu"], capture_output=True, text=True, timeout=300, env=CONFIG.server_env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "restock(), empty body line" in out and "typed 'i'" in out and " ms  " in out
    assert "engine calls" in out and "latency p50" in out


def test_demo_explains_a_missing_model(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "demo", "--model", str(tmp_path / "none"),
                           "--device", "cpu"], capture_output=True, text=True, timeout=300, env=CONFIG.server_env)
    assert proc.returncode == 1 and "does not exist" in proc.stdout and "--model" in proc.stdout


def test_demo_answers_at_once_then_again_with_the_compiled_steps(tiny_model):
    """`make run` on a fresh machine: eager answers while the CPU steps compile, then the same
    session with the compiled steps (the tiny model compiles in a minute or so)."""
    env = {**CONFIG.server_env, "SPANFILL_COMPILE": "1"}
    proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "demo", "--model", str(tiny_model),
                           "--device", "cpu"], capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    building = out.index("compiled CPU steps are building")
    first = out.index("restock(), empty body line")
    again = out.index("the same again with the compiled steps")
    assert building < first < again < out.index("restock(), empty body line", again)
    assert out.count("typed '('") == 2
