"""Shipping a run writes a loadable default-model directory with a model card built from the run's records."""
import json

import pytest

from spanfill.engine import Engine
from spanfill.engine.tools.ship import main as ship_main
from spanfill.engine.training.train import main as train_main

from test_training import _make_tree  # noqa: E402  (tests/engine is on sys.path under pytest's rootdir import mode)


def _trained_run(tmp_path, steps: int, *flags: str):
    """A corpus built from a small tree and a tiny run trained on it for `steps` steps (with `flags`)."""
    from spanfill.engine.training import corpus
    src = tmp_path / "src"
    src.mkdir()
    _make_tree(src, n=40)
    corpus.build(tmp_path / "data", [src])
    run = tmp_path / "run"
    train_main(["--data", str(tmp_path / "data"), "--out", str(run), "--preset", "tiny", "--batch", "2",
                "--total-steps", str(steps), "--no-compile", *flags])
    return run


def test_ship_copies_the_model_and_writes_the_card(tmp_path):
    run = _trained_run(tmp_path, steps=2)
    report = {"command": "spanfill eval --x", "results": [
        {"kind": "single", "mode": "diffusion", "steps": 4, "tasks": 10, "exact_match": 0.3, "edit_similarity": 0.61,
         "latency_median_ms": 12.0, "latency_p95_ms": 20.0, "forward_passes_mean": 2.5}]}
    (tmp_path / "eval.json").write_text(json.dumps(report))
    out = tmp_path / "default_model"
    ship_main(["--run", str(run), "--data", str(tmp_path / "data"), "--eval", str(tmp_path / "eval.json"),
               "--train-command", "spanfill train --preset tiny", "--out", str(out)])
    card = (out / "MODEL_CARD.md").read_text()
    assert "30.0%" in card and "spanfill train --preset tiny" in card and "2 optimiser steps" in card
    assert Engine.load(out, warmup=False).info["params"] > 0
    assert (out / "train_log.jsonl").read_text() == (run / "train_log.jsonl").read_text()


def test_ship_can_set_the_default_steps(tmp_path):
    run = _trained_run(tmp_path, steps=1)
    (tmp_path / "eval.json").write_text(json.dumps({"results": []}))
    out = tmp_path / "default_model"
    args = ["--run", str(run), "--data", str(tmp_path / "data"), "--eval", str(tmp_path / "eval.json"),
            "--train-command", "spanfill train --preset tiny", "--out", str(out)]
    ship_main(args + ["--steps", "8"])
    assert json.loads((run / "config.json").read_text())["steps"] == 4          # the run is left as it was
    assert Engine.load(out, warmup=False).info["steps"] == 8
    assert "T=8 steps (set when shipping, `--steps 8`; the run's configuration said T=4" in (out / "MODEL_CARD.md").read_text()
    with pytest.raises(SystemExit):
        ship_main(args + ["--steps", "0"])


def test_ship_can_take_the_runs_average_instead_of_its_last_step(tmp_path):
    """--weights RUN/ema ships the EMA `spanfill train --ema` saved; the card says so, the log is the run's."""
    run = _trained_run(tmp_path, 2, "--ema", "0.9")
    (tmp_path / "eval.json").write_text(json.dumps({"results": []}))
    out = tmp_path / "default_model"
    ship_main(["--run", str(run), "--data", str(tmp_path / "data"), "--eval", str(tmp_path / "eval.json"),
               "--train-command", "spanfill train --preset tiny --ema 0.9", "--out", str(out), "--weights", str(run / "ema")])
    assert (out / "model.safetensors").read_bytes() == (run / "ema" / "model.safetensors").read_bytes()
    assert (out / "model.safetensors").read_bytes() != (run / "model.safetensors").read_bytes()
    assert (out / "train_log.jsonl").read_text() == (run / "train_log.jsonl").read_text()
    card = (out / "MODEL_CARD.md").read_text()
    assert "exponential moving average (`--ema 0.9`, its centre of mass 10 steps back), as saved at step 2" in card


def test_a_ship_that_cannot_finish_leaves_the_shipped_model_as_it_was(tmp_path):
    """The weights, config and log were copied over the shipped model before the evaluation was read:
    a missing --eval left new weights under the old card."""
    run = _trained_run(tmp_path, 1)
    out = tmp_path / "default_model"
    args = ["--run", str(run), "--data", str(tmp_path / "data"), "--train-command", "x", "--out", str(out)]
    (tmp_path / "eval.json").write_text(json.dumps({"results": []}))
    ship_main(args + ["--eval", str(tmp_path / "eval.json")])
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (tmp_path / "b").mkdir()
    other = _trained_run(tmp_path / "b", 2)
    args[1] = str(other)
    with pytest.raises(FileNotFoundError):
        ship_main(args + ["--eval", str(tmp_path / "missing.json")])
    with pytest.raises(SystemExit):                                   # weights it would ship are not there
        ship_main(args + ["--eval", str(tmp_path / "eval.json"), "--weights", str(tmp_path / "nowhere")])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    from spanfill.engine.core.checkpoint import load_model, save_model
    model, tok = load_model(other)
    save_model(tmp_path / "sharded", model, tok, shard_bytes=300_000)    # shipped as shards, as gpu_run writes
    ship_main(args + ["--eval", str(tmp_path / "eval.json"), "--weights", str(tmp_path / "sharded")])
    assert not (out / "model.safetensors").exists()                    # the old file would load before them
    assert Engine.load(out, warmup=False).info["params"] > 0
