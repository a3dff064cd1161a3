"""Public diffusion checkpoints (engine/families) on tiny random replicas of their real on-disk
layouts (engine/families/replica.py): detection, loading, logits against transformers' stock
reference models with a full attention mask, the logits shift, the infill prompt, the dual cache,
completions through the engine and `spanfill batch`, and the errors for broken checkpoints.

Numerics are compared in float32 with atol 1e-4 on logits of magnitude ~10: the replicas' weights
are stored in bf16 (fp32 for CoDA) and both sides read the same files, so the difference is only
the order of float32 operations; a missing shift, a causal mask or a wrong tie moves logits by
more than 0.1 (checked for the mask below).
"""
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

from spanfill.engine import CancelledError, CheckpointError, CompletionRequest, Engine
from spanfill.engine.families import engine as family_engine
from spanfill.engine.families.engine import FamilyEngine
from spanfill.engine.families.loader import build_backbone, open_checkpoint
from spanfill.engine.families.replica import FAMILY_OF, VARIANTS, build_replica
from spanfill.engine.testing import SAMPLE_PREFIX, SAMPLE_SUFFIX
from spanfill.engine.tools import batch, evaluate

ATOL = 1e-4
FAMILIES = ("dream", "dreamon", "open-dcoder", "coda", "llada")     # one replica variant per family


@pytest.fixture(scope="session")
def replicas(tmp_path_factory):
    root = tmp_path_factory.mktemp("replicas")
    return {v: build_replica(root / v, v) for v in VARIANTS}


@pytest.fixture(scope="session")
def engines(replicas):
    return {v: Engine.load(replicas[v], device="cpu", dtype="fp32", warmup=False) for v in FAMILIES}


def read_state(directory):
    index = directory / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() else ["model.safetensors"]
    state = {}
    for f in files:
        state.update(load_file(str(directory / f)))
    return {k: v.float() for k, v in state.items()}


LLAMA_NAMES = {"attn_out": "self_attn.o_proj", "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
               "v_proj": "self_attn.v_proj", "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj",
               "ff_out": "mlp.down_proj", "attn_norm": "input_layernorm", "ff_norm": "post_attention_layernorm"}


def stock_reference(directory, variant):
    """transformers' own model for the replica, built from its config.json values by hand (LLaDA as
    LlamaForCausalLM with the tensors renamed): the reference the engine's backbones must match."""
    cfg = json.loads((directory / "config.json").read_text())
    state = read_state(directory)
    if variant == "llada":
        config = LlamaConfig(hidden_size=cfg["d_model"], intermediate_size=cfg["mlp_hidden_size"],
                             num_hidden_layers=cfg["n_layers"], num_attention_heads=cfg["n_heads"],
                             num_key_value_heads=cfg["n_kv_heads"], vocab_size=cfg["embedding_size"],
                             rms_norm_eps=cfg["rms_norm_eps"], rope_theta=cfg["rope_theta"],
                             max_position_embeddings=cfg["max_sequence_length"], tie_word_embeddings=False)
        renamed = {}
        for name, t in state.items():
            parts = name.split(".")
            if parts[2] == "blocks":
                renamed[f"model.layers.{parts[3]}.{LLAMA_NAMES[parts[4]]}.weight"] = t
            else:
                renamed[{"wte": "model.embed_tokens.weight", "ln_f": "model.norm.weight",
                         "ff_out": "lm_head.weight"}[parts[2]]] = t
        model, state = LlamaForCausalLM(config), renamed
    else:
        keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "rms_norm_eps", "rope_theta", "vocab_size", "max_position_embeddings")
        kwargs = {k: cfg[k] for k in keys}
        if variant == "coda":
            model = Qwen3ForCausalLM(Qwen3Config(**kwargs, head_dim=cfg["head_dim"], tie_word_embeddings=False))
        else:
            model = Qwen2ForCausalLM(Qwen2Config(**kwargs, tie_word_embeddings=cfg["tie_word_embeddings"]))
    model.load_state_dict(state, strict=True)
    return model.eval()


def reference_logits(model, ids, causal=False):
    N = ids.shape[1]
    mask = None if causal else torch.ones(1, 1, N, N, dtype=torch.bool)   # a full (bidirectional) mask
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits[0]


# -- detection and loading ------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_detects_the_family_and_its_special_tokens_by_name(replicas, variant):
    ckpt = open_checkpoint(replicas[variant])
    assert ckpt.family.name == FAMILY_OF[variant]
    tok, sp = ckpt.tokenizer, ckpt.special
    mask = {"open-dcoder": "<M>", "llada": "<|mdm_mask|>"}.get(variant, "<|mask|>")
    assert sp.mask == tok.token_id(mask) == json.loads((replicas[variant] / "config.json").read_text()).get(
        "mask_token_id", sp.mask)
    assert sp.mask in sp.banned and not set(sp.ends) & set(sp.banned)
    if variant == "dreamon":
        assert (sp.expand, sp.delete) == (tok.token_id("<|expand|>"), tok.token_id("<|endoftext|>"))
    if variant == "diffucoder":
        assert tok.token_id("<|dlm_pad|>") in sp.ends


@pytest.mark.parametrize("variant", ["dream", "open-dcoder", "coda"])
def test_added_tokens_left_non_special_but_shaped_as_control_tokens_are_neither_read_nor_written(replicas, variant):
    """Qwen's files mark <|fim_prefix|>, <tool_call> (and Qwen3's <think>) "special": false: text that
    spelled one was encoded as that token, and the model could propose it."""
    ckpt = open_checkpoint(replicas[variant])
    tok, sp = ckpt.tokenizer, ckpt.special
    plain = ["<|fim_middle|>", "<tool_call>"] + (["<think>"] if variant == "coda" else [])
    for content in plain:
        tid = tok.token_id(content)
        assert tid is not None and tid in sp.banned, content
        text = f"prompt = '{content}'\n"
        assert tid not in tok.encode(text) and tok.decode(tok.encode(text)) == text


def test_the_dream_family_needs_no_tokenizer_json(replicas):
    assert not (replicas["dream"] / "tokenizer.json").exists()
    tok = open_checkpoint(replicas["dream"]).tokenizer
    text = "def add(a, b):\n    return a + b  # é\n"
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("<|mask|>") != [tok.token_id("<|mask|>")]      # text cannot inject a control token


@pytest.mark.parametrize("name, broken", [
    ("added_tokens.json", {"<|mask|>": "x"}), ("added_tokens.json", {"<|mask|>": None}),
    ("added_tokens.json", {"<|mask|>": "²"}),                    # a digit to str.isdigit, not to int()
    ("tokenizer_config.json", {"added_tokens_decoder": {"151666": {"special": True}}}),
    ("tokenizer_config.json", {"added_tokens_decoder": ["<|mask|>"]}),
])
def test_a_broken_added_tokens_file_is_a_checkpoint_error_naming_it(replicas, tmp_path, name, broken):
    """A token id that is no integer, an entry without its token, a list for an object: a bare
    ValueError, KeyError or AttributeError that named no file."""
    directory = copy_of(replicas, "dream", tmp_path)
    path = directory / name
    path.write_text(json.dumps({**json.loads(path.read_text()), **broken}) if path.exists() else json.dumps(broken))
    with pytest.raises(CheckpointError, match=name.replace(".", "\\.")):
        open_checkpoint(directory)


@pytest.mark.parametrize("variant", FAMILIES)
def test_logits_equal_the_stock_reference_with_a_full_attention_mask(replicas, variant):
    ckpt = open_checkpoint(replicas[variant])
    backbone = build_backbone(ckpt, torch.device("cpu"), torch.float32)
    ids = torch.tensor([ckpt.tokenizer.encode(SAMPLE_PREFIX)[-40:]])
    with torch.no_grad():
        ours = backbone.logits(backbone.hidden(ids, torch.arange(ids.shape[1])[None], None))[0]
    reference = stock_reference(replicas[variant], variant)
    full = reference_logits(reference, ids)
    torch.testing.assert_close(ours, full, atol=ATOL, rtol=0)
    assert (reference_logits(reference, ids, causal=True) - full).abs().max() > 0.1   # the mask matters here


@pytest.mark.parametrize("variant", FAMILIES)
def test_span_logits_are_shifted_as_the_family_does(replicas, engines, variant):
    """The first step's logits for span position j are the reference output at j-1 (Dream family,
    Open-dCoder, CoDA) or at j (LLaDA)."""
    engine = engines[variant]
    tok = engine.tokenizer
    lay = engine.layout(tok.encode(SAMPLE_PREFIX), tok.encode(SAMPLE_SUFFIX)[:20], 8)
    with torch.inference_mode():
        hidden, _, _ = engine.full_forward([lay], record=False)
        ours = engine.backbone.logits(hidden[0])
    full = reference_logits(stock_reference(replicas[variant], variant), torch.tensor([lay.ids]))
    shift = 1 if FAMILY_OF[variant] != "llada" else 0
    torch.testing.assert_close(ours, full[lay.start - shift:lay.start - shift + 8], atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", FAMILIES)
def test_infill_prompt_layout(engines, variant):
    engine = engines[variant]
    tok = engine.tokenizer
    P, S = tok.encode("def f(x):\n    return "), tok.encode("\n\nprint(f(2))\n")
    t = tok.token_id
    mask = engine.special.mask
    expected = {
        "dream": [t("<|beginoftext|>")] + P + [mask] * 4 + S + [t("<|endoftext|>")],
        "dreamon": [t("<|beginoftext|>")] + P + [mask] * 4 + S + [t("<|endoftext|>")],
        "open-dcoder": P + [mask] * 4 + S,
        "coda": P + [mask] * 4 + S,
        "llada": [t("<|startoftext|>")] + P + [mask] * 4 + S,
    }[variant]
    lay = engine.layout(P, S, 4)
    assert list(lay.ids) == expected
    assert lay.ids[lay.start:lay.start + 4] == (mask,) * 4


@pytest.mark.parametrize("variant", FAMILIES)
def test_a_window_step_against_the_dual_cache_equals_the_full_forward_it_was_recorded_in(engines, variant):
    engine = engines[variant]
    tok = engine.tokenizer
    lay = engine.layout(tok.encode(SAMPLE_PREFIX), tok.encode(SAMPLE_SUFFIX)[:30], 8)
    with torch.inference_mode():
        full, recorder, _ = engine.full_forward([lay])
        cache = engine.cache_for(2, lay)
        cache.fill(recorder, 0, lay.context())
        span = torch.full((2, 8), engine.special.mask)
        window = engine.window_step(cache, lay, span)
    torch.testing.assert_close(window, full.expand(2, -1, -1), atol=ATOL, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("variant", ["dream", "llada"])
def test_cuda_graph_window_steps_equal_eager_ones_and_completions_run(replicas, variant):
    engine = Engine.load(replicas[variant], device="cuda", dtype="bf16", warmup=False)
    assert engine.graphs is not None
    tok = engine.tokenizer
    lay = engine.layout(tok.encode(SAMPLE_PREFIX), tok.encode(SAMPLE_SUFFIX)[:30], 8)
    with torch.inference_mode():
        _, recorder, _ = engine.full_forward([lay])
        cache = engine.cache_for(1, lay)
        cache.fill(recorder, 0, lay.context().to(engine.device))
        span = torch.full((1, 8), engine.special.mask, device=engine.device)
        graphed = engine.window_step(cache, lay, span).clone()
        assert engine.graphs.usable, engine.graphs.state
        eager = engine.backbone.hidden(*_window_inputs(engine, lay, span), cache.mask, cache)[:, lay.rows(lay.window[0])]
    torch.testing.assert_close(graphed.float(), eager.float(), atol=1e-2, rtol=0)
    result = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4, n=2))
    assert len(result.texts) == 2 and engine.info["cuda_graphs"].startswith("on")


def _window_inputs(engine, lay, span):
    w0, w1 = lay.window
    head = torch.tensor(lay.ids[w0:lay.start], dtype=torch.long, device=engine.device)
    return torch.cat([head.expand(span.shape[0], -1), span], 1), torch.arange(w0, w1, device=engine.device)[None]


# -- completions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", FAMILIES)
def test_completes_through_engine_load(engines, variant):
    engine = engines[variant]
    assert isinstance(engine, FamilyEngine) and engine.info["family"] == FAMILY_OF[variant]
    result = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4))
    assert len(result.texts) == 1 and isinstance(result.texts[0], str)
    assert 1 <= result.steps_run and result.context_tokens > 0
    assert result.timings.total_ms > 0


def test_windows_sent_with_their_ids_are_not_encoded_again(engines, monkeypatch):
    engine = engines["dream"]
    request = dict(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=2, span_length=16, cut=False)
    by_text = engine.complete(CompletionRequest(**request))
    ids = dict(prefix_ids=engine.tokenizer.encode(SAMPLE_PREFIX), suffix_ids=engine.tokenizer.encode(SAMPLE_SUFFIX))
    monkeypatch.setattr(engine.tokenizer, "encode", lambda text: pytest.fail(f"encoded {text[:20]!r} again"))
    by_ids = engine.complete(CompletionRequest(**request, **ids))
    assert by_ids.texts == by_text.texts and by_ids.context_tokens == by_text.context_tokens
    with pytest.raises(ValueError, match="already cut"):
        engine.complete(CompletionRequest(**{**request, "cut": True}, **ids))


@pytest.mark.parametrize("variant", ["dream", "llada", "dreamon"])    # DreamOn: one candidate at a time
def test_candidates_are_one_batch_and_the_greedy_one_matches_a_single_greedy_run(engines, variant):
    engine = engines[variant]
    request = dict(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4, span_length=16)
    greedy = engine.complete(CompletionRequest(**request)).texts[0]
    several = engine.complete(CompletionRequest(**request, n=3, temperature=1.0, seed=1, greedy_first=True))
    assert len(several.texts) == 3 and several.texts[0] == greedy


def test_one_step_is_the_same_with_and_without_the_dual_cache(engines):
    engine = engines["coda"]
    request = CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=1, span_length=8)
    with_cache = engine.complete(request).texts
    engine.dual_cache = engine.reuse_prefix = False
    try:
        assert engine.complete(request).texts == with_cache
    finally:
        engine.dual_cache = engine.reuse_prefix = True


def test_the_prefix_is_reused_across_requests_and_counted_as_approximate(engines):
    engine = engines["open-dcoder"]
    engine.prefixes.clear()
    request = CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=2, span_length=8)
    first = engine.complete(request)
    second = engine.complete(request)
    typed = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX + " +", suffix=SAMPLE_SUFFIX, steps=2, span_length=8))
    prefix_tokens = len(engine.tokenizer.encode(SAMPLE_PREFIX))
    assert first.reused_tokens == 0
    assert second.reused_tokens == prefix_tokens - 1        # all but the token before the span (shifted)
    assert second.texts == first.texts                       # reused from an identical prompt: exact
    assert 0 < typed.reused_tokens < prefix_tokens
    assert engine.cache_stats["approximate"] is True


def test_reused_prefix_keys_follow_the_suffix_and_are_refreshed(engines):
    """The stored prefix keys/values attended to the suffix of the prompt that encoded them: a
    request with another suffix encodes afresh (and answers as a fresh engine does), and a run of
    reuses ends after MAX_REUSES."""
    from spanfill.engine.families.dual_cache import MAX_REUSES
    engine = engines["llada"]
    engine.prefixes.clear()
    def complete(prefix: str, suffix: str):
        return engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, steps=2, span_length=8))
    complete(SAMPLE_PREFIX, SAMPLE_SUFFIX)
    edited = complete(SAMPLE_PREFIX, "\n")                  # the code below the cursor changed
    assert edited.reused_tokens == 0
    engine.prefixes.clear()
    assert complete(SAMPLE_PREFIX, "\n").texts == edited.texts
    reused = [complete(SAMPLE_PREFIX + "x" * i, "\n").reused_tokens for i in range(1, MAX_REUSES + 3)]
    assert all(r > 0 for r in reused[:MAX_REUSES]) and reused[MAX_REUSES] == 0 and reused[MAX_REUSES + 1] > 0


def test_dreamon_counts_a_completion_once_towards_the_reuse_bound(engines):
    """DreamOn stores the prefix again after every forward of a completion (each candidate, each change
    of length): the bound counts completions, not forwards."""
    from spanfill.engine.families.dual_cache import MAX_REUSES
    engine = engines["dreamon"]
    engine.prefixes.clear()
    reused = [engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX + "x" * i, suffix=SAMPLE_SUFFIX, n=3,
                                                temperature=1.0, seed=i)).reused_tokens
              for i in range(MAX_REUSES + 1)]
    assert reused[0] == 0 and all(r > 0 for r in reused[1:])


def test_dreamon_span_changes_length_while_denoising(engines, monkeypatch):
    """DreamOn's first step proposes <|expand|> at its most confident position, so the span grows."""
    engine = engines["dreamon"]
    sp = engine.special
    real_pick = FamilyEngine.pick
    calls = []

    def pick(self, hidden, masked, cfg, gen, bias):
        confidence, proposal = real_pick(self, hidden, masked, cfg, gen, bias)
        if not calls:
            best = confidence[0].argmax()
            proposal[0, best] = sp.expand
            confidence[0, best] = 2.0
        calls.append(masked.shape[1])
        return confidence, proposal

    monkeypatch.setattr(FamilyEngine, "pick", pick)
    engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4, span_length=4))
    assert calls[0] == 4 and calls[1] == 5


def test_cancelled_before_start_and_the_deadline_end_the_denoising(engines):
    engine = engines["llada"]
    with pytest.raises(CancelledError):
        engine.complete(CompletionRequest(prefix="x", suffix="", cancelled=lambda: True))
    result = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=8, deadline_ms=0))
    assert result.deadline_hit and result.steps_run == 1


def test_past_the_deadline_dreamon_leaves_later_candidates_empty(engines):
    """DreamOn decodes its candidates one at a time: one begun after the deadline is left empty (each
    ran a forward pass past it), the first still answers."""
    result = engines["dreamon"].complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4,
                                                           n=3, deadline_ms=0))
    assert result.deadline_hit and result.forward_passes == 1
    assert len(result.texts) == 3 and result.texts[1:] == ["", ""]


def test_past_the_deadline_the_eos_length_ends_the_span_without_a_second_forward(engines, monkeypatch):
    """The `eos` strategy lays the span out again at the length its first forward chose (a second
    full forward); past the deadline it ends the span it has at that length instead."""
    engine = engines["dream"]
    assert engine.length == "eos"
    monkeypatch.setattr(family_engine, "end_split", lambda p_end: torch.tensor([3]))
    full = []
    real_full_forward = FamilyEngine.full_forward
    monkeypatch.setattr(FamilyEngine, "full_forward", lambda self, layouts, spans=None, record=True: (
        full.append([lay.length for lay in layouts]) or real_full_forward(self, layouts, spans, record)))
    late = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4, span_length=8,
                                             deadline_ms=0))
    assert late.deadline_hit and late.forward_passes == 1 and full == [[8]]
    assert len(engine.tokenizer.encode(late.texts[0])) <= 3
    full.clear()
    in_time = engine.complete(CompletionRequest(prefix=SAMPLE_PREFIX, suffix=SAMPLE_SUFFIX, steps=4, span_length=8))
    assert not in_time.deadline_hit and full[:2] == [[8], [3]]       # the span laid out again at its length


def test_ar_mode_is_refused_with_a_reason(engines):
    with pytest.raises(ValueError, match="bidirectional diffusion model"):
        engines["coda"].complete(CompletionRequest(prefix="x", suffix="", mode="ar"))


@pytest.mark.parametrize("variant", FAMILIES)
def test_spanfill_batch_completes_with_a_family_checkpoint(replicas, tmp_path, variant):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"prefix": SAMPLE_PREFIX, "suffix": SAMPLE_SUFFIX}) + "\n")
    out = tmp_path / "out.jsonl"
    assert batch.main([str(tasks), str(out), "--model", str(replicas[variant]), "--device", "cpu", "--steps", "2"]) == 0
    row = json.loads(out.read_text())
    assert isinstance(row["completion"], str) and row["latency_ms"] > 0


def test_spanfill_eval_runs_the_diffusion_modes_of_a_family_checkpoint(replicas, held_out_data, tmp_path):
    out = tmp_path / "eval.json"
    assert evaluate.main(["--data", str(held_out_data), "--model", str(replicas["llada"]), "--device", "cpu",
                          "--single", "2", "--multi", "1", "--span", "16", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["model"]["family"] == "llada"
    assert {r["mode"] for r in report["results"]} == {"diffusion"}


def test_the_server_status_names_the_family(engines):
    from spanfill.server.session import Session
    session = Session()
    assert session.status()["family"] is None
    session.scheduler.engine = engines["coda"]
    assert session.status()["family"] == "coda"


# -- broken checkpoints ---------------------------------------------------------------------------

def copy_of(replicas, variant, tmp_path):
    return shutil.copytree(replicas[variant], tmp_path / variant)


def test_an_unknown_family_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}))
    with pytest.raises(CheckpointError, match="model_type 'gpt2' .* is not a model family spanfill serves"):
        Engine.load(tmp_path, device="cpu")


def test_a_remote_code_only_architecture_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "sdar", "architectures": ["SDARForCausalLM"], "auto_map": {"AutoModel": "modeling_sdar.SDAR"}}))
    with pytest.raises(CheckpointError, match="only as the publisher's remote code .* never runs"):
        Engine.load(tmp_path, device="cpu")


def test_missing_shards_are_counted(replicas, tmp_path):
    directory = copy_of(replicas, "dream", tmp_path)
    (directory / "model-00003-of-00004.safetensors").unlink()
    with pytest.raises(CheckpointError, match="lacks 1 of its 4 weight shards .*model-00003-of-00004"):
        Engine.load(directory, device="cpu")


def test_a_tokenizer_without_a_mask_token_is_refused(replicas, tmp_path):
    directory = copy_of(replicas, "open-dcoder", tmp_path)
    for name in ("tokenizer.json", "added_tokens.json", "tokenizer_config.json", "special_tokens_map.json"):
        path = directory / name
        path.write_text(path.read_text().replace("<M>", "<|fim_extra|>"))
    with pytest.raises(CheckpointError, match="no mask token '<M>' or '\\[MASK\\]'.*autoregressive"):
        Engine.load(directory, device="cpu")


def test_pickled_weights_are_never_loaded(replicas, tmp_path):
    directory = copy_of(replicas, "coda", tmp_path)
    for shard in directory.glob("model*.safetensors*"):
        shard.unlink()
    (directory / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(CheckpointError, match="only pickled weights"):
        Engine.load(directory, device="cpu")


def test_weights_that_do_not_fit_the_config_are_named(replicas, tmp_path):
    directory = copy_of(replicas, "llada", tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "mlp_hidden_size": 96}))
    with pytest.raises(CheckpointError, match="ff_proj.weight has shape .* config.json implies"):
        Engine.load(directory, device="cpu")


@pytest.mark.parametrize("variant,change", [("dream", {"num_attention_heads": 0}), ("dream", {"hidden_size": "64"}),
                                            ("llada", {"n_heads": 0}), ("llada", {"max_sequence_length": None}),
                                            ("dream", {"max_position_embeddings": 0}),
                                            ("llada", {"max_sequence_length": -4})])
def test_config_values_a_model_cannot_be_built_from_are_named(replicas, tmp_path, variant, change):
    broken = copy_of(replicas, variant, tmp_path)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(CheckpointError, match="config.json"):
        Engine.load(broken, device="cpu")


@pytest.mark.parametrize("weight_map,match", [({"model.embed_tokens.weight": 3}, "weight_map must map"),
                                              ({"model.embed_tokens.weight": None}, "weight_map must map"),
                                              ({"model.embed_tokens.weight": "../model.safetensors"}, "outside"),
                                              ({"model.embed_tokens.weight": "/etc/x.safetensors"}, "outside")])
def test_a_shard_index_naming_other_than_shard_files_in_the_folder_is_refused(replicas, tmp_path, weight_map, match):
    directory = copy_of(replicas, "dream", tmp_path)           # sharded, with an index, as Dream ships
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(CheckpointError, match=match):
        Engine.load(directory, device="cpu")


@pytest.mark.parametrize("variant", ["dream", "dreamon"])
def test_windows_cut_to_the_positions_a_model_has(replicas, tmp_path, variant):
    """A model with fewer positions than the default windows and a span: cut=True requests on a long
    file are cut to fit, not refused."""
    directory = copy_of(replicas, variant, tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 160}))
    engine = Engine.load(directory, device="cpu", dtype="fp32")
    prefix = "".join(f"value_{i} = compute({i}, {i + 1})\n" for i in range(400)) + "y = a"
    result = engine.complete(CompletionRequest(prefix=prefix, suffix=" + 1\n" * 300, steps=2))
    assert len(result.texts) == 1 and result.context_tokens <= 160


def test_a_config_mask_id_that_disagrees_with_the_tokenizer_is_refused(replicas, tmp_path):
    directory = copy_of(replicas, "coda", tmp_path)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "mask_token_id": 1}))
    with pytest.raises(CheckpointError, match="mask_token_id 1 but the tokenizer"):
        Engine.load(directory, device="cpu")


def test_a_relative_folder_a_save_left_half_swapped_loads_as_a_folder_not_a_hub_id(tiny_model, tmp_path, monkeypatch):
    """`runs/best` (relative, so it reads as `owner/name`) whose save stopped between its renames was
    sent to the hub loader ("not in the local Hugging Face cache") instead of being put back."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_model, tmp_path / "runs" / "best.old")
    engine = Engine.load("runs/best", device="cpu", warmup=False)
    assert isinstance(engine, Engine) and (tmp_path / "runs" / "best" / "config.json").is_file()


@pytest.mark.parametrize("env,where", [
    ({"HF_HUB_CACHE": "{tmp}/a", "HUGGINGFACE_HUB_CACHE": "{tmp}/b", "HF_HOME": "{tmp}/c"}, "{tmp}/a"),
    ({"HUGGINGFACE_HUB_CACHE": "{tmp}/b", "HF_HOME": "{tmp}/c"}, "{tmp}/b"),
    ({"HF_HOME": "{tmp}/c", "XDG_CACHE_HOME": "{tmp}/x"}, "{tmp}/c/hub"),
    ({"XDG_CACHE_HOME": "{tmp}/x"}, "{tmp}/x/huggingface/hub"),
    ({}, "{home}/.cache/huggingface/hub")])
def test_the_hub_cache_is_found_where_huggingface_hub_puts_it(tmp_path, monkeypatch, env, where):
    from spanfill.engine.families.hub import hub_cache
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    assert hub_cache() == Path(where.format(tmp=tmp_path, home=tmp_path / "home"))


def test_a_hub_id_resolves_from_the_local_cache_offline(replicas, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--Salesforce--CoDA-v0-Base"
    shutil.copytree(replicas["coda"], repo / "snapshots" / "0123abc")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abc")
    engine = Engine.load("Salesforce/CoDA-v0-Base", device="cpu", warmup=False)
    assert engine.info["family"] == "coda"
    with pytest.raises(CheckpointError, match="not in the local Hugging Face cache .*hf download GSAI-ML/LLaDA-8B-Base"):
        Engine.load("GSAI-ML/LLaDA-8B-Base", device="cpu")
