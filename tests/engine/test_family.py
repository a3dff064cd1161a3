"""The spanfill model implements the model-family seam (core/family.py) that decoding uses."""
from spanfill.engine.core.family import ModelFamily


def test_the_spanfill_model_is_a_model_family(model_and_tok):
    model, _ = model_and_tok
    assert isinstance(model, ModelFamily)
    kv = model.allocate_kv(40)
    assert len(kv) == model.cfg.n_layers
    assert kv[0][0].shape == (1, model.cfg.n_heads, 40, model.cfg.head_dim) and kv[0][0].dtype == model.embed.weight.dtype


def test_something_without_a_span_step_is_not_one():
    class CausalOnly:
        cfg = embed = None

        def allocate_kv(self, capacity, batch=1): ...
        def encode_context(self, tokens, start, kv): ...
        def logits(self, h): ...

    assert not isinstance(CausalOnly(), ModelFamily)
