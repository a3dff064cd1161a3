"""End-to-end: `spanfill serve` with a public diffusion checkpoint as its model, one tiny random
replica per family (engine/families/replica.py), switched through workspace/didChangeConfiguration
as an editor's `model` setting would: the server loads it, `spanfill/status` names the family, and
an inline completion request is answered by that engine. Random weights make arbitrary text: the
test asserts the path, not the words."""
import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from spanfill.engine.families.replica import build_replica

from lsp_helpers import CONFIG, first_suggestion, start, status

pytestmark = pytest.mark.asyncio(loop_scope="module")

FAMILIES = ("dream", "dreamon", "open-dcoder", "coda", "llada")
SOURCE = '''def add(a, b):
    """Return the sum of a and b."""
    return a


def scale(values, factor):
    result = []
    for value in values:
        result.append(value * )
    return result
'''
POSITIONS = [types.Position(2, 12), types.Position(8, 30), types.Position(1, 4)]


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    root = tmp_path_factory.mktemp("family_replicas")
    return {name: build_replica(root / name, name) for name in FAMILIES}


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, replicas):
    await start(lsp_client, replicas["dream"], debounceMs=0, spanLength=8, steps=2)
    yield
    await lsp_client.shutdown_session()


async def serving(client: LanguageClient, model) -> object:
    for _ in range(600):
        now = await status(client)
        if now.model == str(model) and now.state in ("ready", "failed"):
            return now
        await asyncio.sleep(0.1)
    pytest.fail(f"the server did not load {model}")


@pytest.mark.parametrize("family", FAMILIES)
async def test_the_server_serves_each_family(client: LanguageClient, replicas, family):
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"spanfill": {"model": str(replicas[family]), "device": "cpu", "dtype": "fp32",
                               "debounceMs": 0, "spanLength": 8, "steps": 2}}))
    loaded = await serving(client, replicas[family])
    assert loaded.state == "ready" and loaded.error is None
    assert loaded.family == family
    # random weights write text Python would reject (a Python document shows none of it, and a public
    # checkpoint has no AR path to fall back on): the document is plain text
    _, text, _ = await first_suggestion(client, f"file:///families/{family}.txt", SOURCE, POSITIONS, "plaintext")
    assert text
    assert (await status(client)).engineCalls > loaded.engineCalls
