"""Checkpoint loading errors and tokenizer round-trips."""
import json
import re
import shutil

import pytest
import torch
from hypothesis import given, settings, strategies as st

from spanfill.engine import CheckpointError, Engine
from spanfill.engine.core.checkpoint import load_model


@pytest.fixture
def broken(tiny_dir, tmp_path):
    target = tmp_path / "model"
    shutil.copytree(tiny_dir, target)
    return target


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nope")


def test_missing_weights(broken):
    (broken / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="lacks model.safetensors"):
        Engine.load(broken)


def test_truncated_weights(broken):
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_model(broken)


def test_garbage_weights(broken):
    (broken / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_model(broken)


def test_config_that_does_not_match_the_weights(broken):
    cfg = json.loads((broken / "config.json").read_text())
    cfg["dim"] *= 2
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="does not match"):
        load_model(broken)


@pytest.mark.parametrize("key, value, named", [("vocab_size", 1 << 40, "does not match"),
                                               ("n_layers", 1 << 30, "does not match"),
                                               ("max_positions", 10 ** 9, "max_positions=1000000000")])
def test_a_config_of_absurd_sizes_is_refused_before_anything_is_allocated(broken, key, value, named):
    """The model was built at the config's sizes (and initialised) before its weights were compared: a
    typo such as a vocabulary of 2**40 ended in an allocation error, or a machine out of memory."""
    cfg = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**cfg, key: value}))
    with pytest.raises(CheckpointError, match=named):
        load_model(broken)


@pytest.mark.parametrize("key", ["n_heads", "rope_theta", "norm_eps", "max_positions"])
def test_a_config_without_what_the_weights_do_not_settle_is_refused(broken, key):
    """A missing n_heads, rope_theta, norm_eps or max_positions was filled with the preset's default:
    a model that loads and computes something other than what it was trained to."""
    cfg = json.loads((broken / "config.json").read_text())
    del cfg[key]
    (broken / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=f"lacks {key}"):
        load_model(broken)


def test_a_model_path_that_is_a_file_says_so(broken):
    with pytest.raises(CheckpointError, match="is a file; pass the directory holding it"):
        load_model(broken / "model.safetensors")


def test_a_loaded_model_does_not_change_when_its_file_is_written_over(broken):
    """The weights read from model.safetensors map the file: a model that kept them (rather than
    copies) changed when the file was overwritten in place while it was loaded."""
    model, _ = load_model(broken)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    path = broken / "model.safetensors"
    header = 8 + int.from_bytes(path.read_bytes()[:8], "little")
    with open(path, "r+b") as f:       # the same size, the tensors' bytes zeroed where they lie
        f.seek(header)
        f.write(bytes(path.stat().st_size - header))
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())


def test_corrupt_config(broken):
    (broken / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json"):
        load_model(broken)


@pytest.mark.parametrize("change, named", [
    (lambda c: [c], "JSON list"), (lambda c: {**c, "n_heads": 0}, "n_heads=0"),
    (lambda c: {**c, "vocab_size": -1}, "vocab_size=-1"), (lambda c: {**c, "span_length": "16"}, "span_length='16'"),
    (lambda c: {**c, "steps": 0}, "steps=0"), (lambda c: {**c, "max_positions": 8}, "max_positions=8"),
    (lambda c: {**c, "rope_theta": None}, "rope_theta=None"),
    (lambda c: {**c, "steps": 129}, "steps=129"), (lambda c: {**c, "span_length": 300, "max_positions": 4096}, "span_length=300"),
    (lambda c: {**c, "special_tokens": {"mask": 10**6}}, "special_tokens")])
def test_a_config_with_wrong_types_or_values_is_a_checkpoint_error_naming_the_field(broken, change, named):
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps(change(config)))
    with pytest.raises(CheckpointError, match=re.escape(named)):
        load_model(broken)


def test_pickle_is_never_loaded(broken):
    """Only safetensors are read: a pytorch_model.bin beside them is ignored, a lone one is refused."""
    (broken / "model.safetensors").rename(broken / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="lacks model.safetensors"):
        load_model(broken)


def test_sharded_weights_load_like_one_file(tiny_dir, tmp_path):
    """Weights written as shards of at most a size, with their index, load into the same model."""
    import torch
    from spanfill.engine.core.checkpoint import INDEX, save_model, weight_files
    model, tok = load_model(tiny_dir)
    limit = 200_000
    save_model(tmp_path / "sharded", model, tok, shard_bytes=limit, dtype=torch.bfloat16)
    files = weight_files(tmp_path / "sharded")
    shards = [f for f in files if f != INDEX]
    assert files[0] == INDEX and len(shards) > 1 and not (tmp_path / "sharded" / "model.safetensors").exists()
    assert all((tmp_path / "sharded" / f).stat().st_size <= limit for f in shards)
    loaded, _ = load_model(tmp_path / "sharded")
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor.to(torch.bfloat16).float()), name
    engine = Engine.load(tmp_path / "sharded", device="cpu", dtype="fp32", warmup=False, compile=False)
    assert engine.info["params"] == model.num_params()
    (tmp_path / "sharded" / shards[-1]).unlink()
    with pytest.raises(CheckpointError, match="lacks " + shards[-1]):
        load_model(tmp_path / "sharded")


def test_an_index_naming_files_outside_the_directory_is_refused(broken):
    (broken / "model.safetensors").unlink()
    (broken / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"embed.weight": "../model.safetensors"}}))
    with pytest.raises(CheckpointError, match="outside the directory"):
        load_model(broken)


@pytest.mark.parametrize("weight_map", [[], {"embed.weight": None}, {"embed.weight": 3}, "model.safetensors"])
def test_an_index_whose_weight_map_is_not_names_to_files_is_refused(broken, weight_map):
    (broken / "model.safetensors").unlink()
    (broken / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match="weight_map must map"):
        load_model(broken)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokenizer_round_trips_any_text(tiny_tok, text):
    assert tiny_tok.decode(tiny_tok.encode(text)) == text


@pytest.mark.parametrize("text", ["\tif x:\r\n\t\treturn '😀'\r\n", "    \n\n  \t", "<|eom|><|mask|> literal", "ünïcödé → ∑"])
def test_tokenizer_round_trips_code_and_never_emits_control_tokens(tiny_tok, text):
    tok = tiny_tok
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    sp = tok.special
    assert not set(ids) & {sp.pad, sp.mask, sp.eom, sp.file, sp.suffix, sp.prefix, sp.middle}
