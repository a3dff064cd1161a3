"""int8 matmuls (quantize.py): close to fp32, only where asked for, and released with their module."""
import gc

import pytest
import torch
import torch.nn as nn

from spanfill.engine import CompletionRequest, Engine
from spanfill.engine.core import device, quantize
from spanfill.engine.core.device import pick_dtype, wants_int8
from spanfill.engine.core.quantize import Int8Linear, quantize_int8
from spanfill.engine.testing import SAMPLE_CODE, SAMPLE_PREFIX, SAMPLE_SUFFIX

pytestmark = pytest.mark.skipif(not quantize.int8_supported(), reason="this torch build has no quantized CPU engine")


def relative_error(got, want):
    return ((got - want).norm() / want.norm()).item()


def causal_logits(model, ids):
    """ids: [1, S] -> next-token logits [1, S, V] of the whole model (every layer, the head)."""
    S = ids.shape[1]
    mask = torch.ones(S, S, dtype=torch.bool).tril()[None, None]    # [1, 1, S, S]
    with torch.inference_mode():
        return model.forward_train(ids, torch.arange(S)[None], mask)


def test_int8_linear_is_close_to_the_fp32_matmul():
    torch.manual_seed(0)
    weight, x = nn.Parameter(torch.randn(96, 64), requires_grad=False), torch.randn(2, 5, 64)   # x: [B, L, K]
    layer = Int8Linear(weight)
    with torch.inference_mode():
        out = layer(x)
    assert out.shape == (2, 5, 96) and out.dtype == torch.float32
    assert relative_error(out, x @ weight.T) < 0.03
    assert relative_error(layer(x.transpose(0, 1)), (x @ weight.T).transpose(0, 1)) < 0.03   # not contiguous
    # one row (an AR token step) runs the int8 product too, not the fp32 weight
    one = layer(x[:1, :1])
    assert relative_error(one, x[:1, :1] @ weight.T) < 0.03
    assert torch.equal(one, torch.ops.spanfill.int8_linear(x[:1, :1], layer.handle, 96))
    assert not torch.equal(one, torch.nn.functional.linear(x[:1, :1], weight))
    # a weight with one row a thousand times the others: per-row scales keep the small rows exact
    weight[0] *= 1000
    assert relative_error(Int8Linear(weight)(x)[..., 1:], (x @ weight.T)[..., 1:]) < 0.03


def test_quantize_int8_replaces_the_layers_it_names_and_keeps_w2(model_and_tok):
    model, _ = model_and_tok
    params = model.num_params()
    h = torch.randn(1, 8, model.cfg.dim)
    with torch.inference_mode():
        want = model.logits(h)
        quantize_int8(model)
        got = model.logits(h)
    for block in model.layers:
        assert all(isinstance(m, Int8Linear) for m in (block.attn.wqkv, block.attn.wo, block.mlp.w13))
        assert type(block.mlp.w2) is nn.Linear    # its input's outlier channels need fp32
    assert isinstance(model.head, Int8Linear) and model.embed.weight.dtype == torch.float32
    assert relative_error(got, want) < 0.03
    assert model.num_params() == params      # the same weights, the embedding's counted once


def test_only_an_fp32_cpu_model_is_quantized(model_and_tok):
    model, _ = model_and_tok
    with pytest.raises(ValueError, match="fp32 models on the CPU"):
        quantize_int8(model.to(torch.bfloat16))
    with pytest.raises(ValueError, match="for the CPU"):
        wants_int8(torch.device("cuda"), "int8")
    assert pick_dtype(torch.device("cpu"), "int8") == torch.float32
    assert not wants_int8(torch.device("cpu"), "fp32") and not wants_int8(torch.device("cuda"), "auto")


@pytest.mark.parametrize("fast_bf16", [True, False])
def test_auto_runs_int8_only_on_a_cpu_without_fast_bf16(monkeypatch, fast_bf16):
    monkeypatch.setattr(device, "cpu_has_fast_bf16", lambda: fast_bf16)
    assert wants_int8(torch.device("cpu"), "auto") is (not fast_bf16)
    assert pick_dtype(torch.device("cpu"), "auto") == (torch.bfloat16 if fast_bf16 else torch.float32)


def test_int8_without_the_quantized_engine_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(quantize, "int8_supported", lambda: False)
    with pytest.raises(ValueError, match="fbgemm"):
        wants_int8(torch.device("cpu"), "int8")
    assert not wants_int8(torch.device("cpu"), "auto")


def test_a_released_layer_frees_its_packed_weight():
    layer = Int8Linear(nn.Parameter(torch.randn(16, 8)))
    handle = layer.handle
    assert handle in quantize._PACKED
    del layer
    gc.collect()
    assert handle not in quantize._PACKED


def test_an_int8_engine_completes_and_says_so(tiny_dir):
    engine = Engine.load(tiny_dir, device="cpu", dtype="int8", warmup=False, compile=False)
    plain = Engine.load(tiny_dir, device="cpu", dtype="fp32", warmup=False, compile=False)
    assert engine.info["int8_matmuls"] and not plain.info["int8_matmuls"]
    assert engine.info["dtype"] == "float32"
    ids = torch.tensor([plain.tokenizer.encode(SAMPLE_CODE)])      # a fixed batch: the sample file, [1, S]
    want, got = causal_logits(plain.model, ids), causal_logits(engine.model, ids)
    # random weights with a tied head put the input token itself on top at every position, in both
    # models; the choice quantization can change is the best other token
    def best_other(logits):
        return logits.scatter(-1, ids[..., None], float("-inf")).argmax(-1)
    agreement = (best_other(got) == best_other(want)).float().mean().item()
    # bounds with room for another CPU's fbgemm kernels; a wrong scale or layer is far outside them
    assert agreement >= 0.95, f"int8 picks the fp32 model's token at only {agreement:.1%} of positions"
    assert relative_error(got, want) < 0.04
    for mode in ("diffusion", "ar"):
        result = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, mode=mode))
        assert len(result.texts) == 1 and result.steps_run >= 1
