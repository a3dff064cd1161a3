"""What the maxContextTokens tests share, in-process (tests/server) and over the protocol
(tests/e2e): a long file, a cursor in its middle, and the span length of the tiny checkpoints that
conftest's `small_models` builds with 256 and 512 positions, far below a budget of 8192 tokens."""
from pathlib import Path

from lsprotocol import types

from spanfill.engine.testing import SAMPLE_CODE, build_tiny_model, tiny_config

LONG_FILE = SAMPLE_CODE * 60                   # ~1,800 lines
MIDDLE = types.Position(LONG_FILE.count("\n") // 2, 0)
SPAN = tiny_config().span_length               # what each model keeps of its positions for the span


def build_small_models(root: Path) -> tuple[Path, Path]:
    """The 256-position checkpoint (its own budget 128 tokens) and the 512-position one."""
    return (build_tiny_model(root / "p256", max_positions=256, max_context_tokens=128),
            build_tiny_model(root / "p512", max_positions=512))
