"""Training cursors: every cutter splits a file into prefix + middle + suffix the way its kind says."""
import random

import pytest

from spanfill.engine.training.samples import CUTTERS, KINDS

SOURCE = '''import os


class Store:
    """A key-value store on disk."""

    def __init__(self, root):
        self.root = root

    def get(self, key, default=None):
        path = os.path.join(self.root, key)
        if not os.path.exists(path):
\t\treturn default
        with open(path) as f:
            return f.read()
'''


@pytest.mark.parametrize("kind", sorted(CUTTERS))
def test_cuts_reassemble_the_file(kind):
    rng = random.Random(0)
    cuts = [c for c in (CUTTERS[kind](SOURCE, rng) for _ in range(200)) if c is not None]
    assert len(cuts) > 150 and {c.kind for c in cuts} == {kind}
    for c in cuts:
        assert c.prefix + c.middle + c.suffix == SOURCE and c.middle
        if kind == "line_rest":
            assert "\n" not in c.middle and c.suffix.startswith("\n") and c.middle.strip()
        if kind == "lines":
            assert c.prefix[c.prefix.rfind("\n") + 1:].isspace() or c.prefix.endswith("\n") or not c.prefix
            assert not c.middle[0].isspace()
            assert c.suffix.startswith("\n") or not c.suffix   # the middle stops before a line break
        if kind == "line_start":
            assert (c.prefix.endswith("\n") or not c.prefix) and c.middle.endswith("\n") and c.middle.strip()


def test_every_kind_is_drawn():
    assert {k for k, _ in KINDS} == set(CUTTERS) and abs(sum(w for _, w in KINDS) - 1) < 1e-9
