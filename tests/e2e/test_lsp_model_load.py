"""End-to-end: when settings load a model. A server whose model failed to load, with none serving,
loads it again when the client next sends settings, the same ones included: a user who fixes the
model's folder (downloads it, mounts the drive) and saves the settings unchanged gets completions
without restarting the editor. A client that never answers the completion fallback's dynamic
registration does not hold back the model named in the same settings."""
import asyncio
import shutil

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from spanfill.server.headless import wait_until_loaded

from lsp_helpers import CONFIG, capabilities, options, status

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("retry") / "model"     # absent until the test puts a model there


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def client(lsp_client: LanguageClient, model_folder):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities(), initialization_options=options(model_folder)))
    yield
    await lsp_client.shutdown_session()


def load_failures(client: LanguageClient) -> tuple[int, int]:
    """(failures logged, failures shown) so far."""
    return (len([m for m in client.log_messages if "could not load model" in m.message]),
            len([m for m in client.messages if "could not load model" in m.message]))


async def reloaded(client: LanguageClient, settings: dict):
    before = load_failures(client)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))
    for _ in range(600):
        st = await status(client)
        now = load_failures(client)
        if st.state == "ready" or now[0] > before[0]:
            return st, (now[0] - before[0], now[1] - before[1])
        await asyncio.sleep(0.05)
    pytest.fail("the server neither loaded the model nor reported a failure in 30 s")


async def test_the_same_settings_retry_a_model_that_failed_to_load(client: LanguageClient, model_folder, tiny_model):
    first = await wait_until_loaded(client)
    assert first.state == "failed" and first.model is None
    for _ in range(100):          # the state may read "failed" a turn before the message is sent
        if load_failures(client)[1]:
            break
        await asyncio.sleep(0.05)
    assert load_failures(client)[1] == 1
    settings = options(model_folder)

    st, failures = await reloaded(client, settings)         # still missing: tried again, logged, not shown again
    assert (st.state, failures) == ("failed", (1, 0))

    shutil.copytree(tiny_model, model_folder)
    st, failures = await reloaded(client, settings)
    assert (st.state, failures) == ("ready", (0, 0))
    assert st.model == str(model_folder)


@pytest_lsp.fixture(scope="module", config=CONFIG)
async def silent_registrar(lsp_client: LanguageClient, tiny_model):
    """A client that offers dynamic registration of completion and never answers it."""
    release = asyncio.Event()

    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    async def register(params: types.RegistrationParams) -> None:
        await release.wait()

    caps = capabilities()
    caps.text_document.completion = types.CompletionClientCapabilities(dynamic_registration=True)
    await lsp_client.initialize_session(types.InitializeParams(capabilities=caps, initialization_options=options(tiny_model)))
    yield
    release.set()        # answered at last: no handler left waiting when the session ends
    await asyncio.sleep(0.1)
    await lsp_client.shutdown_session()


async def test_an_unanswered_registration_does_not_hold_back_a_model_load(silent_registrar: LanguageClient,
                                                                         tiny_model, tmp_path):
    client = silent_registrar
    assert (await wait_until_loaded(client)).state == "ready"
    other = tmp_path / "other"
    shutil.copytree(tiny_model, other)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings=options(other, completionFallback=True)))
    for _ in range(300):
        st = await status(client)
        if st.model == str(other) and st.state == "ready":
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail(f"the model named with completionFallback was not loaded in 30 s: {st.model}, {st.state}")
