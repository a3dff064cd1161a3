"""benchmarks/engine_micro.py on the tiny random model (eager: tests do not compile): every row it
promises is there, with the right token counts, and the result file is written."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import engine_micro  # noqa: E402


def test_micro_times_every_step_and_completion(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert engine_micro.main(["--repeats", "2"]) == 0
    result = json.loads((tmp_path / "engine_micro.json").read_text())
    context = result["context_tokens"]
    rows = {r["what"]: r for r in result["rows"]}
    typed = engine_micro.TYPED_TOKENS
    assert set(rows) == {f"span step (L={result['span_length']}, +logits), eager",
                         f"context prefill ({context} tokens), eager",
                         f"typed-tail prefill ({typed} tokens after {context - typed}), eager",
                         f"one typed token's prefill (after {context - 1}), eager",
                         "completion T=1", "completion T=2", "completion T=4", "completion T=8",
                         f"completion AR ({rows_ar(rows)} passes)"}
    # AR writes the whole span (no end): one pass a token, fewer where prompt lookup's proposals stood
    assert 1 <= rows_ar(rows) <= result["span_length"]
    # the tiny model never ends a span (eom and pad suppressed): each T runs all its steps
    assert [rows[f"completion T={t}"]["forward_passes"] for t in (1, 2, 4, 8)] == [1, 2, 4, 8]
    assert all(0 < r["median_ms"] <= r["p95_ms"] for r in rows.values())
    assert "typed-tail prefill" in capsys.readouterr().out


def rows_ar(rows: dict) -> int:
    """The forward passes of the AR completion row (its name carries them)."""
    (row,) = [r for name, r in rows.items() if name.startswith("completion AR")]
    return row["forward_passes"]
