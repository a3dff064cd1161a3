"""Render editors/nvim/ghost-text.png: a real Neovim with the plugin, in a tmux pane, showing
ghost text from the real `spanfill serve`. The pane is captured with its colours
(`tmux capture-pane -e`) and drawn to a PNG with Pillow.

    .venv/bin/python editors/nvim/screenshot.py                   # shipped model (or --model DIR)
    .venv/bin/python editors/nvim/screenshot.py --model runs/small --out /tmp/shot.png

Needs tmux and Pillow (pip install pillow); not part of the test suite.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from test_nvim import BIN, INIT, PLUGIN, Nvim, nvim_binary  # noqa: E402  (the e2e test's driver)

EXAMPLE = '''import os


def read_lines(path):
    """Return the lines of a text file, without line endings."""
    with open(path) as f:
        return [line.rstrip("\\n") for line in f]


def count_words(path):
    """Count the words in a text file."""
    total = 0
    for line in read_lines(path):
        '''
SUFFIX = '''
    return total
'''
COLS, ROWS = 84, 22
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
FONT_BOLD = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf"
FG, BG = (0xE0, 0xE2, 0xEA), (0x14, 0x16, 0x1B)          # Neovim's default dark scheme
XTERM16 = [(0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205),
           (229, 229, 229), (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255),
           (255, 0, 255), (0, 255, 255), (255, 255, 255)]


def xterm256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return XTERM16[n]
    if n < 232:
        n -= 16
        level = [0, 95, 135, 175, 215, 255]
        return level[n // 36], level[n // 6 % 6], level[n % 6]
    grey = 8 + 10 * (n - 232)
    return grey, grey, grey


def parse_ansi(text: str) -> list[list[tuple[str, dict]]]:
    """Rows of (char, style) from tmux's SGR-coloured capture."""
    rows, style = [], {"fg": FG, "bg": BG, "bold": False, "reverse": False}
    for line in text.split("\n"):
        row = []
        for token in re.split(r"(\x1b\[[0-9;:]*m)", line):
            if not token.startswith("\x1b["):
                row.extend((ch, dict(style)) for ch in token)
                continue
            codes = [int(c) if c else 0 for c in re.split("[;:]", token[2:-1])] or [0]
            i = 0
            while i < len(codes):
                c = codes[i]
                if c == 0:
                    style = {"fg": FG, "bg": BG, "bold": False, "reverse": False}
                elif c == 1:
                    style["bold"] = True
                elif c == 22:
                    style["bold"] = False
                elif c == 7:
                    style["reverse"] = True
                elif c == 27:
                    style["reverse"] = False
                elif c in (38, 48):
                    key = "fg" if c == 38 else "bg"
                    if codes[i + 1] == 2:
                        style[key], i = tuple(codes[i + 2:i + 5]), i + 4
                    else:
                        style[key], i = xterm256(codes[i + 2]), i + 2
                elif c in (39, 49):
                    style["fg" if c == 39 else "bg"] = FG if c == 39 else BG
                elif 30 <= c <= 37 or 90 <= c <= 97:
                    style["fg"] = XTERM16[c - 30 if c < 90 else c - 82]
                elif 40 <= c <= 47 or 100 <= c <= 107:
                    style["bg"] = XTERM16[c - 40 if c < 100 else c - 92]
                i += 1
        rows.append(row)
    return rows


def render(rows, cursor: tuple[int, int], out: Path, scale: int = 2) -> None:
    size = 14 * scale
    font, bold = ImageFont.truetype(FONT, size), ImageFont.truetype(FONT_BOLD, size)
    cell_w, cell_h = round(font.getlength("M")), round(size * 1.35)
    pad = 12 * scale
    image = Image.new("RGB", (COLS * cell_w + 2 * pad, ROWS * cell_h + 2 * pad), BG)
    draw = ImageDraw.Draw(image)
    for y, row in enumerate(rows[:ROWS]):
        for x, (ch, style) in enumerate(row[:COLS]):
            fg, bg = (style["bg"], style["fg"]) if style["reverse"] else (style["fg"], style["bg"])
            left, top = pad + x * cell_w, pad + y * cell_h
            if bg != BG:
                draw.rectangle([left, top, left + cell_w - 1, top + cell_h - 1], fill=bg)
            if ch != " ":
                draw.text((left, top + (cell_h - size) // 2), ch, font=bold if style["bold"] else font, fill=fg)
    cx, cy = cursor                                       # insert-mode bar cursor
    left, top = pad + cx * cell_w, pad + cy * cell_h
    draw.rectangle([left, top + 2, left + max(2, scale), top + cell_h - 2], fill=FG)
    image.save(out)


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", "-L", "spanfill-shot", *args], check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="", help="model directory (default: the shipped model)")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("ghost-text.png"))
    parser.add_argument("--backend", default="native", choices=["native", "ghost"])
    parser.add_argument("--source", type=Path, help="Python file to show instead of the built-in example; "
                        "the cursor goes to the end of its last line")
    args = parser.parse_args(argv)
    if not shutil.which("tmux"):
        sys.exit("tmux is needed: apt-get install tmux")

    work = Path(tempfile.mkdtemp(prefix="spanfill-shot-"))
    before, after = (args.source.read_text().rstrip("\n"), "\n") if args.source else (EXAMPLE, SUFFIX)
    file = work / (args.source.name if args.source else "words.py")
    file.write_text(before + after)
    env = {
        "SPANFILL_PLUGIN": str(PLUGIN), "SPANFILL_CMD": json.dumps([str(BIN / "spanfill"), "serve"]),
        "SPANFILL_MODEL": str(Path(args.model).resolve()) if args.model else "",
        "SPANFILL_BACKEND": args.backend, "XDG_STATE_HOME": str(work / "state"),
    }
    socket = work / "nvim.sock"
    nvim = nvim_binary()
    command = " ".join([
        *(f"{k}={v!r}" for k, v in env.items()), nvim, "--clean", "-u", str(INIT), "--listen", str(socket),
        "-c", "'set number termguicolors laststatus=2'", file.name,
    ])
    tmux("-f", "/dev/null", "new-session", "-d", "-x", str(COLS), "-y", str(ROWS), "-s", "shot", "-c", str(work), command)
    tmux("set-option", "-g", "default-terminal", "tmux-256color")
    try:
        driver = Nvim(nvim, str(socket))                  # the e2e test's driver, on the tmux nvim
        deadline = time.monotonic() + 30
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        driver.wait(lambda: (s := driver.probe("state"))["attached"] and s["initialized"], 60, "the client")
        row = before.count("\n") + 1
        driver.send(f"<Esc>{row}GA")
        ghost = driver.wait(lambda: driver.probe("ghost"), 60, "ghost text (a model may also have nothing to say here)")
        time.sleep(0.5)                                   # let the screen settle
        print(f"ghost text: {ghost['text']!r}")
        pane = tmux("capture-pane", "-e", "-p", "-t", "shot")
        x, y = (int(v) for v in tmux("display-message", "-p", "-t", "shot", "#{cursor_x} #{cursor_y}").split())
        render(parse_ansi(pane), (x, y), args.out)
        print(f"wrote {args.out}")
    finally:
        subprocess.run(["tmux", "-L", "spanfill-shot", "kill-server"], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
