"""Checkpoint loading errors and tokenizer round-trips."""
import json
import shutil

import pytest
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


def test_corrupt_config(broken):
    (broken / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json"):
        load_model(broken)


def test_pickle_is_never_loaded(broken):
    """Only safetensors are read: a pytorch_model.bin beside them is ignored, a lone one is refused."""
    (broken / "model.safetensors").rename(broken / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="lacks model.safetensors"):
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
