"""End-to-end: `spanfill serve --model DIR --threads N` sets the server's defaults. A client that
sends the unset values (model null or "", device "auto", threads null: what the VS Code extension
sends for settings left empty) keeps them, at initialize and in a later configuration change; any
other value the client names wins (the unset values themselves then mean the command line's)."""
import time

from lsp_helpers import CONFIG, SERVE
from stdio_client import StdioClient

UNSET = {"model": None, "device": "auto", "threads": None, "dtype": "fp32"}


def wait_loaded(server: StdioClient) -> dict:
    deadline = time.monotonic() + 120                               # for a hang
    while (status := server.call("spanfill/status", {})["result"])["state"] not in ("ready", "failed"):
        assert time.monotonic() < deadline, "the model did not load"
        time.sleep(0.05)
    return status


def test_unset_client_settings_keep_the_command_line(tmp_path, tiny_model, small_models):
    other = small_models[0]
    with (tmp_path / "stderr").open("wb") as stderr:
        server = StdioClient([*SERVE, "--model", str(tiny_model), "--device", "cpu", "--threads", "1"],
                             CONFIG.server_env, stderr)
        try:
            init = server.call("initialize", {"processId": None, "capabilities": {},
                                              "initializationOptions": {"spanfill": UNSET}})
            assert "result" in init, init
            server.notify("initialized", {})
            status = wait_loaded(server)
            assert status["state"] == "ready", status["error"]
            assert status["model"] == str(tiny_model)
            assert status["settings"]["model"] == str(tiny_model)
            assert (status["settings"]["device"], status["settings"]["threads"]) == ("cpu", 1)

            server.notify("workspace/didChangeConfiguration", {"settings": {"spanfill": {**UNSET, "model": ""}}})
            settings = server.call("spanfill/status", {})["result"]["settings"]
            assert (settings["model"], settings["device"], settings["threads"]) == (str(tiny_model), "cpu", 1)

            server.notify("workspace/didChangeConfiguration", {"settings": {"spanfill": {"model": str(other)}}})
            status = wait_loaded(server)
            assert status["settings"]["model"] == str(other)
            assert status["model"] == str(other)
            assert server.call("shutdown", None).get("error") is None
            server.notify("exit", None)
        finally:
            server.close()
