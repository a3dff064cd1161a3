"""Shared fixtures: one CPU thread for torch (a training run may own the cores), a tiny
random-weight checkpoint, two with few positions, and the shipped model where it exists. Engines
and the servers the tests start stay eager (SPANFILL_COMPILE=0): the compiled steps have their own
test, and a background compile in every server would cost each test seconds of CPU."""
import json
import os
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)
os.environ["SPANFILL_COMPILE"] = "0"

SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "engine" / "default_model"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from spanfill.engine.testing import build_tiny_model
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def shipped_model() -> Path:
    if not (SHIPPED_MODEL / "model.safetensors").is_file():
        pytest.fail(f"the shipped model is missing from {SHIPPED_MODEL}")
    return SHIPPED_MODEL


@pytest.fixture(scope="session")
def model_that_says(tmp_path_factory):
    """model_that_says(prefix, suffix, wanted, dtype) -> the shipped model if its greedy completion at (prefix, suffix), after the server's
    post-processing (of a Python document), satisfies wanted(text); else the first tiny random-weight checkpoint (seeds
    1..15) that does. Protocol and editor tests need *a* suggestion of some shape at their cursor,
    and what the shipped model says there changes as it trains (its own completions are tested in
    tests/e2e/test_lsp_completions.py)."""
    return lambda prefix, suffix, wanted, dtype="auto": _model_that_says(
        prefix, suffix, wanted, dtype, tmp_path_factory.mktemp("talkative"))


def _model_that_says(prefix: str, suffix: str, wanted, dtype: str, directory: Path) -> Path:
    from spanfill.engine import CompletionRequest, Engine
    from spanfill.engine.testing import build_tiny_model
    from spanfill.engine.decoding.postprocess import Cursor, Shown

    def says(model: Path) -> bool:         # as the server asks and shows it in a Python document
        engine = Engine.load(model, device="cpu", dtype=dtype, warmup=False, compile=False)
        shown = Shown(Cursor(prefix, suffix), python=True)
        raw = engine.complete(CompletionRequest(prefix=prefix, suffix=suffix, cut=False,
                                                would_show=shown.would_show)).texts[0]
        return wanted(shown.text(raw) or "")

    if (SHIPPED_MODEL / "model.safetensors").is_file() and says(SHIPPED_MODEL):
        return SHIPPED_MODEL
    for seed in range(1, 16):
        model = build_tiny_model(directory / f"seed{seed}", seed=seed)
        if says(model):
            return model
    raise AssertionError(f"no tiny model seed in 1..15 completes {prefix[-40:]!r} as the test needs")


@pytest.fixture(scope="session")
def small_models(tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny checkpoints whose positions are far below 8192 tokens: 256 and 512 (long_context.py)."""
    from long_context import build_small_models
    return build_small_models(tmp_path_factory.mktemp("positions"))


@pytest.fixture(scope="session")
def e2e_model(tiny_model) -> Path:
    """The model the end-to-end protocol tests serve: the shipped one once it exists."""
    return SHIPPED_MODEL if (SHIPPED_MODEL / "model.safetensors").is_file() else tiny_model


@pytest.fixture
def held_out_data(tmp_path) -> Path:
    """A `spanfill data` directory whose held-out split is four copies of the sample code."""
    from spanfill.engine.testing import SAMPLE_CODE
    data = tmp_path / "data"
    data.mkdir()
    (data / "held_out.jsonl").write_text("".join(json.dumps({"path": f"pkg/m{i}.py", "text": SAMPLE_CODE}) + "\n"
                                                 for i in range(4)))
    return data
