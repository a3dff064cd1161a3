"""Depth growth (`spanfill grow`): more layers, the same function, and new blocks that can learn."""
import json

import pytest
import torch

from spanfill.engine.api import CompletionRequest
from spanfill.engine.core.checkpoint import load_model
from spanfill.engine.engine import Engine
from spanfill.engine.testing import SAMPLE_PREFIX, SAMPLE_SUFFIX, build_tiny_model
from spanfill.engine.training.growing import expansion_plan, grow, main as grow_main


@pytest.mark.parametrize("old,new,plan", [
    (6, 8, [0, 1, 2, None, 3, 4, 5, None]),
    (2, 2, [0, 1]),
    (2, 3, [0, 1, None]),
    (3, 6, [0, None, 1, None, 2, None]),
    (4, 7, [0, 1, None, 2, None, 3, None]),
    (3, 5, [0, 1, None, 2, None]),
    (2, 5, [0, None, 1, None, None]),
    (1, 3, [0, None, None]),
])
def test_new_blocks_follow_evenly_sized_groups_of_the_original_ones(old, new, plan, tmp_path):
    assert expansion_plan(old, new) == plan
    model, _ = load_model(build_tiny_model(tmp_path / "m", n_layers=old), dtype=torch.float32)
    assert len(grow(model, new).layers) == new


@pytest.mark.parametrize("old,new", [(4, 3), (0, 2)])
def test_a_model_cannot_shrink_or_grow_from_nothing(old, new):
    with pytest.raises(ValueError, match="can grow to"):
        expansion_plan(old, new)


def _batch(model, n=40):
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(7, model.cfg.vocab_size, (2, n), generator=generator)
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))
    mask[n - 10:, n - 10:] = True       # a bidirectional span after a causal context
    return tokens, torch.arange(n), mask


def test_the_grown_model_computes_what_the_original_computes(tmp_path):
    source = build_tiny_model(tmp_path / "small", seed=3, n_layers=3, length_classes=9)
    (source / "train_log.jsonl").write_text('{"step": 7, "tokens": 900, "time": 5.0}\n')
    assert grow_main([str(source), "--layers", "5", "--out", str(tmp_path / "grown")]) == 0
    small, _ = load_model(source, dtype=torch.float32)
    grown, _ = load_model(tmp_path / "grown", dtype=torch.float32)
    assert grown.cfg.n_layers == 5 and len(grown.layers) == 5
    assert grown.num_params() > small.num_params()
    assert json.loads((tmp_path / "grown" / "grown.json").read_text())["layers"] == [0, 1, "new", 2, "new"]
    # its history is the small model's: a run from it continues the step count
    assert (tmp_path / "grown" / "train_log.jsonl").read_text() == (source / "train_log.jsonl").read_text()
    tokens, positions, mask = _batch(small)
    h_small, h_grown = small.hidden_train(tokens, positions, mask), grown.hidden_train(tokens, positions, mask)
    torch.testing.assert_close(h_grown, h_small, rtol=0, atol=0)
    torch.testing.assert_close(grown.logits(h_grown), small.logits(h_small), rtol=0, atol=0)
    torch.testing.assert_close(grown.length_logits(h_grown[:, 5]), small.length_logits(h_small[:, 5]), rtol=0, atol=0)
    # the new blocks are copies of the block before them, with their residual outputs at zero
    torch.testing.assert_close(grown.layers[2].attn.wqkv.weight, small.layers[1].attn.wqkv.weight)
    torch.testing.assert_close(grown.layers[4].mlp.w13.weight, small.layers[2].mlp.w13.weight)
    assert not grown.layers[2].attn.wo.weight.any() and not grown.layers[4].mlp.w2.weight.any()
    # and the engine's cached decoding gives the same completion
    completions = []
    for directory in (source, tmp_path / "grown"):
        engine = Engine.load(directory, device="cpu", dtype="fp32", warmup=False, compile=False)
        completions.append(engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=2)).texts)
    assert completions[0] == completions[1]


def test_the_new_blocks_get_gradients_and_leave_the_original_untouched(tmp_path):
    small, _ = load_model(build_tiny_model(tmp_path / "small", seed=4, n_layers=2), dtype=torch.float32)
    before = {k: v.clone() for k, v in small.state_dict().items()}
    grown = grow(small, 3)
    tokens, positions, mask = _batch(small)
    grown.forward_train(tokens, positions, mask).logsumexp(-1).mean().backward()
    new = grown.layers[2]
    assert new.attn.wo.weight.grad.abs().sum() > 0 and new.mlp.w2.weight.grad.abs().sum() > 0
    assert all(torch.equal(v, before[k]) for k, v in small.state_dict().items())
    assert small.cfg.n_layers == 2 and len(small.layers) == 2
    small.head = torch.nn.Linear(small.cfg.dim, small.cfg.vocab_size)    # as quantize.py gives one
    with pytest.raises(ValueError, match="quantized head"):
        grow(small, 3)


def test_grow_refuses_to_write_over_its_input_or_a_run_and_names_a_bad_count(tmp_path, capsys):
    source = build_tiny_model(tmp_path / "small", n_layers=2)
    weights = (source / "model.safetensors").read_bytes()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "train_state.json").write_text("{}")
    (tmp_path / "file").write_text("x")
    for out in (source, tmp_path / "run", tmp_path / "file"):
        with pytest.raises(SystemExit):
            grow_main([str(source), "--layers", "3", "--out", str(out)])
    assert "not an empty directory" in capsys.readouterr().err
    assert grow_main([str(source), "--layers", "1", "--out", str(tmp_path / "x")]) == 2
    assert "can grow to" in capsys.readouterr().err
    assert (source / "model.safetensors").read_bytes() == weights and not (tmp_path / "x").exists()
