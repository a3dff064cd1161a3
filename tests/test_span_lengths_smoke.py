"""benchmarks/span_lengths.py on the shipped model (eager, a few tasks): every set of cut lengths and
AR decode every task, each set's steps run on its own lengths only, and the rows are paired against
the first set and AR."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import span_lengths  # noqa: E402
from report_sections import span_lengths_section  # noqa: E402


def test_each_set_of_lengths_cuts_its_own_spans(shipped_model, held_out_data, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    seen: dict[tuple, set] = {}
    load = span_lengths.load_engine

    def watched(*args, **kw):   # each span step's length, by the set of lengths in force
        engine = load(*args, **kw)
        step = engine.model.span_step

        def span_step(span, *a, **k):
            seen.setdefault(engine.shrink_to, set()).add(span.shape[1])
            return step(span, *a, **k)
        monkeypatch.setattr(engine.model, "span_step", span_step)
        return engine
    monkeypatch.setattr(span_lengths, "load_engine", watched)
    assert span_lengths.main(["--model", str(shipped_model), "--data", str(held_out_data), "--multi", "4",
                              "--cuts", "16,8", "none", "--eager"]) == 0
    result = json.loads((tmp_path / "results" / "span_lengths.json").read_text())
    assert result["union"] == [16, 8]
    rows = {(r["split"], r["mode"], tuple(r["cut"]) if r["cut"] is not None else None): r for r in result["rows"]}
    assert set(rows) == {(s, m, c) for s in ("all", str(held_out_data))
                         for m, c in (("diffusion", (16, 8)), ("diffusion", ()), ("ar", None))}
    assert {r["tasks"] for r in rows.values()} == {4}
    assert rows[("all", "ar", None)]["vs_first"]["es_diff"] == -rows[("all", "diffusion", (16, 8))]["vs_ar"]["es_diff"]
    assert seen[()] == {32}                       # no cut: the whole span at every step
    # the shipped model's head ends some of these middles within 16 tokens: their steps ran cut
    assert seen[(16, 8)] & {16, 8} and seen[(16, 8)] <= {32, 16, 8}
    text = "\n".join(span_lengths_section(result, "today; "))
    assert "| all | none | 4 |" in text and "vs 16,8" in text


def test_lengths_the_span_cannot_be_cut_to_are_refused(shipped_model, held_out_data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    with pytest.raises(SystemExit):
        span_lengths.main(["--model", str(shipped_model), "--data", str(held_out_data), "--multi", "1",
                           "--cuts", "40,16", "--eager"])
    assert "40 is not shorter than the model's span of 32" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_cut_lengths_parse_and_reject_nonsense():
    assert span_lengths.lengths("24,16,8") == (24, 16, 8) and span_lengths.lengths("none") == ()
    with pytest.raises(Exception, match="not comma-separated"):
        span_lengths.lengths("24;16")
    with pytest.raises(Exception, match="positive"):
        span_lengths.lengths("16,0")
