"""End-to-end: `spanfill serve --log-file PATH --log-level LEVEL` writes spanfill's log records of
that level and above to PATH, and none of them to stderr (stdout carries the protocol alone)."""
import time

import pytest

from lsp_helpers import CONFIG, SERVE, options
from stdio_client import StdioClient

LOADED = "INFO spanfill.server.lsp: model ready:"                          # once the model has loaded
REFUSED = "WARNING spanfill.server.lsp: spanfill: setting steps=0 ignored"  # for a setting the server refuses


def serve_and_log(tmp_path, model, level: str) -> tuple[str, str]:
    """Run a server at `level` until its model is loaded and it has refused a setting; return
    (the log file, stderr)."""
    log, err = tmp_path / f"{level}.log", tmp_path / f"{level}.stderr"
    with err.open("wb") as stderr:
        server = StdioClient([*SERVE, "--log-file", str(log), "--log-level", level], CONFIG.server_env, stderr)
        try:
            init = server.call("initialize", {"processId": None, "capabilities": {},
                                              "initializationOptions": options(model)})
            assert "result" in init, init
            server.notify("initialized", {})
            deadline = time.monotonic() + 120                      # for a hang; the verdict is the log
            while (state := server.call("spanfill/status", {})["result"]["state"]) not in ("ready", "failed"):
                assert time.monotonic() < deadline, "the model did not load"
                time.sleep(0.05)
            assert state == "ready"
            server.notify("workspace/didChangeConfiguration", {"settings": {"spanfill": {"steps": 0}}})
            server.call("spanfill/status", {})                     # answered after the change was handled
            assert server.call("shutdown", None).get("error") is None
            server.notify("exit", None)
        finally:
            server.close()
    return log.read_text(), err.read_text()


@pytest.mark.parametrize("level,logged", [("info", [LOADED, REFUSED]), ("warning", [REFUSED])])
def test_log_file_holds_the_records_of_the_log_level(tmp_path, tiny_model, level, logged):
    log, stderr = serve_and_log(tmp_path, tiny_model, level)
    for record in (LOADED, REFUSED):
        assert (record in log) == (record in logged), f"--log-level {level}: {record!r} in the log file:\n{log}"
        assert record not in stderr, f"{record!r} went to stderr as well"
