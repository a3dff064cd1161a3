"""Weight averaging: the EMA a training run keeps (`--ema`) and `spanfill average` of checkpoints."""
import json

import pytest
import torch

from spanfill.engine.core.checkpoint import CheckpointError, load_model
from spanfill.engine.testing import build_tiny_model
from spanfill.engine.training.averaging import WeightEMA, average_models, main as average_main


def _weights(directory):
    model, _ = load_model(directory, dtype=torch.float32)
    return {k: v for k, v in model.state_dict().items() if v.is_floating_point()}


def test_ema_update_is_the_decayed_mix_of_the_average_and_the_new_weights(model_and_tok):
    model, _ = model_and_tok
    ema = WeightEMA(model, decay=0.75)
    before = {k: v.clone() for k, v in ema.model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    try:
        ema.update(model)
        for (name, value), p in zip(ema.model.named_parameters(), model.parameters()):
            torch.testing.assert_close(value, 0.75 * before[name] + 0.25 * p.detach())
    finally:
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(1.0)
    assert not any(p.requires_grad for p in ema.model.parameters())


@pytest.mark.parametrize("decay", [0.0, 1.0, -0.5, 2.0])
def test_ema_rejects_a_decay_outside_zero_to_one(model_and_tok, decay):
    with pytest.raises(ValueError, match="between 0 and 1"):
        WeightEMA(model_and_tok[0], decay)


def test_average_of_checkpoints_is_their_elementwise_mean(tmp_path):
    a = build_tiny_model(tmp_path / "a", seed=1)
    b = build_tiny_model(tmp_path / "b", seed=2)
    c = build_tiny_model(tmp_path / "c", seed=3)
    assert average_main([str(a), str(b), str(c), "--out", str(tmp_path / "mean")]) == 0
    wa, wb, wc, mean = (_weights(d) for d in (a, b, c, tmp_path / "mean"))
    assert any(not torch.equal(wa[k], wb[k]) for k in wa)
    for k in wa:
        torch.testing.assert_close(mean[k], (wa[k] + wb[k] + wc[k]) / 3)
    assert json.loads((tmp_path / "mean" / "average.json").read_text())["kind"] == "mean"


def test_average_refuses_checkpoints_of_different_architectures(tmp_path, capsys):
    a = build_tiny_model(tmp_path / "a")
    wide = build_tiny_model(tmp_path / "wide", n_layers=3)
    with pytest.raises(CheckpointError, match="config differs"):
        average_models([a, wide])
    assert average_main([str(a), str(wide), "--out", str(tmp_path / "x")]) == 2
    assert "config differs" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_average_needs_two_checkpoints(tmp_path, capsys):
    a = build_tiny_model(tmp_path / "a")
    assert average_main([str(a), "--out", str(tmp_path / "x")]) == 2
    assert "at least two" in capsys.readouterr().err


def test_average_never_writes_over_an_input_or_a_training_run(tmp_path, capsys):
    """The mean written over a run's folder kept the run's optimiser state and step beside it: resumed,
    the run trained the mean as if it were its own weights."""
    a, b = build_tiny_model(tmp_path / "a"), build_tiny_model(tmp_path / "b")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train_state.json").write_text("{}")
    (tmp_path / "file").write_text("x")
    weights = (a / "model.safetensors").read_bytes()
    for out, says in ((a, "one of the checkpoints"), (tmp_path / "run", "a training run"),
                      (tmp_path / "file", "a training run or a file")):
        with pytest.raises(SystemExit):
            average_main([str(a), str(b), "--out", str(out)])
        assert says in capsys.readouterr().err
    assert (a / "model.safetensors").read_bytes() == weights
    assert average_main([str(a), str(b), "--out", str(tmp_path / "mean")]) == 0
