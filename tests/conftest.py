"""Shared fixtures: one CPU thread for torch (a training run may own the cores), a tiny
random-weight checkpoint, and the shipped model where it exists. Engines and the servers the tests
start stay eager (SPANFILL_COMPILE=0): the compiled steps have their own test, and a background
compile in every server would cost each test seconds of CPU."""
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
def e2e_model(tiny_model) -> Path:
    """The model the end-to-end protocol tests serve: the shipped one once it exists."""
    return SHIPPED_MODEL if (SHIPPED_MODEL / "model.safetensors").is_file() else tiny_model
