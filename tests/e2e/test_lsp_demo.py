"""`make run` runs `spanfill demo`: a headless session that types into examples/inventory.py."""
import asyncio
import subprocess
import sys

from lsprotocol import types

from lsp_helpers import CONFIG
from spanfill.server.headless import make_client, start, stop


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


def test_demo_explains_a_file_it_cannot_type_into(tmp_path):
    """Any file without the example's two functions ended in a StopIteration traceback."""
    other = tmp_path / "a.py"
    other.write_text("x = 1\n")
    half = tmp_path / "b.py"
    half.write_text("def restock(items):\n    \n    pass\n")
    for path, missing in ((other, "'def restock' and no 'def cheapest'"), (half, "'def cheapest'"), (tmp_path, None)):
        proc = subprocess.run([sys.executable, "-m", "spanfill.server.cli", "demo", "--file", str(path)],
                              capture_output=True, text=True, timeout=120, env=CONFIG.server_env)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert (missing in proc.stderr) if missing else "is not a file" in proc.stderr, proc.stderr


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


async def test_the_headless_client_keeps_the_servers_log_messages(tiny_model, tmp_path, caplog):
    """The server's warnings reach the client as window/logMessage: kept, not pygls's 'Ignoring
    notification for unknown method' on the demo's stderr."""
    client = make_client("test")
    st = await start(client, tmp_path / "server.log", model=str(tiny_model), device="cpu")
    try:
        assert st.state == "ready", st
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri="file:///not/open.py", version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="x = 1\n")]))
        for _ in range(100):
            if any("not open" in m for m in client.log_messages):
                break
            await asyncio.sleep(0.05)
        assert any("file:///not/open.py" in m and "not open" in m for m in client.log_messages), list(client.log_messages)
        assert "Ignoring notification" not in caplog.text
    finally:
        await stop(client)
