"""benchmarks/line_start.py on the shipped model (eager, a few tasks): both decodings under both line
policies on the same line tasks, paired against `first line`, and its table in the report."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import line_start  # noqa: E402
from report_sections import line_start_section  # noqa: E402


def test_line_start_compares_the_policies_on_the_same_tasks(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert line_start.main(["--model", str(shipped_model), "--data", str(held_out_data), "--tasks", "4", "--eager"]) == 0
    result = json.loads((tmp_path / "line_start.json").read_text())
    rows = {(r["mode"], r["policy"]): r for r in result["rows"]}
    assert set(rows) == {(m, p) for m in ("diffusion", "ar") for p in ("whole lines", "first line")}
    assert result["tasks"] == {"single": 0, "multi": 0, "line": 4}
    assert {r["tasks"] for r in rows.values()} == {4}
    for mode in ("diffusion", "ar"):
        # the first line alone never carries the break, so it never gives back the file
        assert rows[(mode, "first line")]["file_exact"] == 0.0 and "vs_first_line" not in rows[(mode, "first line")]
        whole = rows[(mode, "whole lines")]
        assert whole["file_exact"] <= whole["shown_exact_match"]
        assert set(whole["vs_first_line"]) == {"won", "lost", "es_diff", "es_diff_se"}
    text = "\n".join(line_start_section(result))
    assert "Line-level infilling" in text and text.count("| whole lines |") == 2


def test_first_line_is_the_single_line_policy_and_whole_lines_keep_the_break():
    from spanfill.engine import Cursor
    cursor = Cursor("def f(x):\n    y = x * 2\n", "    return y\n")
    # the first line alone joins `    return y`: not Python, so nothing is shown
    assert line_start.first_line("    y = y + 1\n    ", cursor) is None
    assert line_start.whole_lines("    y = y + 1\n    ", cursor) == "    y = y + 1\n"
