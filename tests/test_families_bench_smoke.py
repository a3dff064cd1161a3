"""benchmarks/families.py on the 0.5B shape cut to one layer (its real vocabulary and width), one
repeat, T=2: every row it promises is there, the dual cache runs 1 prefill + T-1 span steps, and the
JSON and PNG are written."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import families  # noqa: E402


def test_families_benchmark_times_every_row(tmp_path):
    assert families.main(["--layers", "1", "--context", "24", "--repeats", "1", "--steps", "2", "--dtype", "fp32",
                          "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "families.json").read_text())
    (shape,) = report["shapes"]
    assert shape["shape"] == "open-dcoder-0.5b" and shape["family"] == "open-dcoder"
    rows = {r["what"]: r for r in shape["rows"]}
    assert set(rows) == {"prefill", "prefill, typed (prefix reused)", "span step", "head + pick (span rows)",
                         "completion T=2, dual cache", "completion T=2, no cache"}
    assert rows["prefill"]["tokens"] == 24 + 32
    assert rows["prefill, typed (prefix reused)"]["tokens"] < rows["prefill"]["tokens"]
    assert rows["span step"]["tokens"] == 33                      # the span and the position before it
    assert rows["completion T=2, dual cache"]["forward_passes"] == 2
    assert all(r["median_ms"] > 0 for r in rows.values())
    assert (tmp_path / "families.png").stat().st_size > 0
