"""Engine test fixtures: a tiny random-weight checkpoint built once per session, loaded in fp32 so
cached/uncached comparisons are tight."""
import pytest
import torch

from spanfill.engine import Engine
from spanfill.engine.core.checkpoint import load_model
from spanfill.engine.testing import build_tiny_model

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def engine(tiny_dir):
    return Engine.load(tiny_dir, device="cpu", dtype="fp32", warmup=False)


@pytest.fixture
def model_and_tok(tiny_dir):
    return load_model(tiny_dir, dtype=torch.float32)


@pytest.fixture(scope="session")
def tiny_tok(tiny_dir):
    from spanfill.engine.core.tokenizer import Tokenizer
    return Tokenizer.from_file(tiny_dir / "tokenizer.json")
