"""benchmarks/limit.py on the tiny random model, eager (tests do not compile): the step, both
bounds and the profiled split of the step's time are written."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import common  # noqa: E402
import limit  # noqa: E402


def test_limit_reports_bounds_and_where_the_step_goes(tmp_path, monkeypatch, tiny_model, capsys):
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    assert limit.main(["--model", str(tiny_model), "--eager", "--context", "64"]) == 0
    r = json.loads((tmp_path / "limit.json").read_text())
    assert r["step"]["median_ms"] > 0 and r["weight_stream_bound_ms"] > 0 and r["flop_bound_ms"] > 0
    assert r["weight_and_kv_stream_bound_ms"] > r["weight_stream_bound_ms"] and r["kv_bytes"] > 0
    parts = r["step_breakdown_ms"]
    assert set(parts) == {"attention", "kernels", "other", "profiled_ms"}
    # the tiny model attends in every layer and multiplies matrices; the parts add up to the whole
    assert parts["attention"] > 0 and parts["kernels"] > 0
    assert abs(parts["attention"] + parts["kernels"] + parts["other"] - parts["profiled_ms"]) < 0.01
    assert "profiled step: attention" in capsys.readouterr().out


def test_breakdown_sorts_profiled_rows():
    import torch
    q = torch.randn(1, 2, 8, 16)
    w = torch.randn(16, 16)

    def step():
        y = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        torch.mm(y.reshape(-1, 16), w)
    parts = limit.step_breakdown(step, steps=3)
    assert parts["attention"] > 0 and parts["kernels"] > 0
