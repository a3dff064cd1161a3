"""The Llama export decodes exactly like spanfill's AR mode."""
import json
import shutil
from pathlib import Path

import pytest
import torch

from spanfill.engine import CompletionRequest
from spanfill.engine.core.checkpoint import CheckpointError
from spanfill.engine.tools.export_llama import export, generate_completion
from spanfill.engine.decoding.prompt import context_ids
from spanfill.engine.testing import SAMPLE_PREFIX, SAMPLE_SUFFIX, build_tiny_model


def test_generate_matches_ar_mode(engine, tiny_dir, tmp_path):
    from transformers import LlamaForCausalLM
    llama = LlamaForCausalLM.from_pretrained(export(tiny_dir, tmp_path / "llama"), dtype=torch.float32).eval()
    tok, sp = engine.tokenizer, engine.tokenizer.special
    ids = context_ids(tok, SAMPLE_PREFIX, SAMPLE_SUFFIX, budget=engine.budget)
    L = 12
    with torch.inference_mode():
        logits = llama(torch.tensor([ids])).logits[0, -1]
        mine = engine.model.logits(engine.model.encode_context(torch.tensor([ids]), 0, engine.cache.allocate(len(ids))))[0]
        assert torch.allclose(logits, mine, atol=1e-4)
        out = llama.generate(torch.tensor([ids]), max_new_tokens=L, do_sample=False, eos_token_id=sp.eom,
                             suppress_tokens=[sp.pad, sp.mask, sp.file, sp.suffix, sp.prefix, sp.middle], pad_token_id=sp.pad)
    generated = out[0, len(ids):].tolist()
    end = generated.index(sp.eom) if sp.eom in generated else len(generated)
    result = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, mode="ar", span_length=L,
                                               heal=False))
    assert result.texts == [tok.decode(generated[:end])]
    assert len(generated[:end]) >= 3     # a real sequence was compared, not an immediate <|eom|>


def test_generate_completion_heals_like_ar_mode(engine, tiny_dir, tmp_path):
    from transformers import LlamaForCausalLM
    llama = LlamaForCausalLM.from_pretrained(export(tiny_dir, tmp_path / "llama"), dtype=torch.float32).eval()
    for prefix in (SAMPLE_PREFIX + "ret", "x = self.app", SAMPLE_PREFIX):
        with torch.inference_mode():
            text, _ = generate_completion(llama, engine, prefix, SAMPLE_SUFFIX, 12)
        result = engine.complete(CompletionRequest(prefix=prefix, suffix=SAMPLE_SUFFIX, mode="ar", span_length=12))
        assert result.texts == [text]


def test_the_export_never_overwrites_a_spanfill_checkpoint(tiny_dir, tmp_path):
    """--out naming the model's own folder (or any spanfill checkpoint) is refused before a file is written."""
    model = Path(shutil.copytree(tiny_dir, tmp_path / "model"))
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    with pytest.raises(CheckpointError, match="holds a spanfill checkpoint"):
        export(model, model)
    assert {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} == before
    out = export(tiny_dir, tmp_path / "llama")
    assert export(tiny_dir, out) == out            # an earlier export is written over
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_an_export_interrupted_over_an_earlier_one_leaves_that_one_whole(tiny_dir, tmp_path, monkeypatch):
    """Each file used to be replaced on its own: stopped after the config, an export left the new config
    beside the old weights (a checkpoint that loads and is wrong, where shapes agree)."""
    out = export(tiny_dir, tmp_path / "llama")
    (out / "README.md").write_text("notes")              # a file of the user's stays
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    other = build_tiny_model(tmp_path / "other", seed=5, n_layers=3)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr("spanfill.engine.tools.export_llama.save_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        export(other, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["llama", "other"]     # no half-written folder beside it
    monkeypatch.undo()
    export(other, out)
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 3
    assert (out / "README.md").read_text() == "notes"


def test_a_spanfill_checkpoint_caught_between_its_save_renames_is_put_back_not_exported_over(tiny_dir, tmp_path):
    """A spanfill save stopped between its two renames leaves RUN.old and no RUN: the export's check
    found no checkpoint at RUN, and the swap then put it back and wrote the Llama files into it."""
    run = tmp_path / "run"
    shutil.copytree(tiny_dir, tmp_path / "run.old")
    before = {p.name: p.read_bytes() for p in (tmp_path / "run.old").iterdir()}
    with pytest.raises(CheckpointError, match="holds a spanfill checkpoint"):
        export(tiny_dir, run)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_an_export_over_a_file_fails_and_leaves_no_half_written_folder(tiny_dir, tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(OSError):
        export(tiny_dir, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (tmp_path / "out").read_text() == "x"
