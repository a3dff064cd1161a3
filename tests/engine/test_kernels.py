"""The Triton kernels against their torch references in denoise.py.

Triton decides whether to interpret when it is imported, so the interpreted run is a child pytest
process of this same file with TRITON_INTERPRET=1 in its environment only: there the kernels run on
CPU tensors. Where CUDA is available, this process runs the same tests on the compiled kernels.
"""
import os
import subprocess
import sys

import pytest
import torch

from spanfill.engine.decoding import kernels
from spanfill.engine.decoding.denoise import commit_threshold, commit_topk, pick_tokens

pytest.importorskip("triton")

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEVICES = ["cpu"] if INTERPRETED else ["cuda"] if torch.cuda.is_available() else []


@pytest.mark.skipif(INTERPRETED, reason="already the interpreted run")
def test_kernels_match_references_under_triton_interpret():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "TRITON_INTERPRET" not in os.environ


@pytest.fixture(params=DEVICES or [None])
def device(request):
    if request.param is None:
        pytest.skip("compiled kernels need CUDA; on CPU they run in the TRITON_INTERPRET=1 child process")
    return request.param


def random_logits(rows: int, vocab: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, vocab, generator=g) * 3).to(dtype)


def reference_pick(logits: torch.Tensor, banned):
    return pick_tokens(logits.cpu().clone(), 0.0, banned=banned)   # the torch path: CPU tensors never dispatch


@pytest.mark.parametrize("vocab", [1000, 1031, 2 * 1024 + 1, 97])   # not a multiple of the 1024 block, one below it
@pytest.mark.parametrize("banned", [None, [0, 3, 5, 96], list(range(1, 40, 2))])   # the last: two chunks of 16
def test_confidence_argmax_matches_pick_tokens(device, vocab, banned):
    logits = random_logits(13, vocab, seed=vocab)
    if banned:   # make banned ids the largest logits, so a kernel that ignores the list fails
        logits[:, banned] = 100.0
    conf, token = kernels.confidence_argmax(logits.to(device), banned)
    ref_conf, ref_token = reference_pick(logits, banned)
    assert conf.dtype == torch.float32 and token.dtype == torch.int64
    assert token.cpu().tolist() == ref_token.tolist()
    torch.testing.assert_close(conf.cpu(), ref_conf, rtol=1e-5, atol=1e-7)


def test_confidence_argmax_ties_pick_the_lowest_id_across_blocks(device):
    logits = random_logits(4, 3000, seed=1)
    logits[0, [7, 2500]] = 50.0          # tie in different blocks
    logits[1, [1500, 1600]] = 50.0       # tie in one block
    logits[2, :] = 0.0                   # the whole row ties: uniform distribution
    logits[3, [4, 9]] = 50.0             # the lower one is banned
    banned = [4]
    conf, token = kernels.confidence_argmax(logits.to(device), banned)
    ref_conf, ref_token = reference_pick(logits, banned)
    assert token.cpu().tolist() == ref_token.tolist() == [7, 1500, 0, 9]
    torch.testing.assert_close(conf.cpu(), ref_conf, rtol=1e-5, atol=1e-7)
    assert conf[2].item() == pytest.approx(1 / 2999)           # uniform over the 2999 allowed ids


def test_confidence_argmax_reads_bf16_and_strided_rows(device):
    logits = random_logits(6, 1200, seed=2, dtype=torch.bfloat16)[::2]   # every other row: row stride 2V
    conf, token = kernels.confidence_argmax(logits.to(device), [1])
    ref_conf, ref_token = reference_pick(logits, [1])
    assert token.cpu().tolist() == ref_token.tolist()
    torch.testing.assert_close(conf.cpu(), ref_conf, rtol=1e-5, atol=1e-7)


def random_commit_inputs(B: int, L: int, seed: int, ties: bool):
    g = torch.Generator().manual_seed(seed)
    conf = torch.rand(B, L, generator=g)
    if ties:   # few distinct values: many equal confidences inside a row
        conf = (conf * 4).floor() / 4
    masked = torch.rand(B, L, generator=g) < 0.6
    masked[0] = True       # fully masked row
    masked[1] = False      # fully committed row
    return conf, masked


def assert_valid_topk(commit, conf, masked, k):
    """commit is a top-k of the masked positions: the right count, and nothing left out beats it."""
    for c, m, row in zip(conf, masked, commit):
        assert not (row & ~m).any(), "committed a position that was not masked"
        assert row.sum().item() == min(k, m.sum().item())
        if row.any() and (m & ~row).any():
            assert c[row].min() >= c[m & ~row].max()


@pytest.mark.parametrize("L", [16, 37, 64, 256])
@pytest.mark.parametrize("k", [0, 1, 5, 16, 300])
@pytest.mark.parametrize("ties", [False, True])
def test_commit_topk_kernel_matches_reference(device, L, k, ties):
    conf, masked = random_commit_inputs(5, L, seed=L * 31 + k, ties=ties)
    commit = kernels.commit(conf.to(device), masked.to(device), k).cpu()
    ref = commit_topk(conf, masked, k)
    assert_valid_topk(commit, conf, masked, k)
    if not ties:   # the top-k set is unique
        assert torch.equal(commit, ref)
    # with ties torch.topk may pick any of the equal positions; the kernel picks the leftmost
    assert_valid_topk(ref, conf, masked, k)


@pytest.mark.parametrize("L", [16, 37])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("ties", [False, True])
def test_commit_threshold_kernel_matches_reference(device, L, threshold, ties):
    conf, masked = random_commit_inputs(6, L, seed=L + int(threshold * 10), ties=ties)
    commit = kernels.commit(conf.to(device), masked.to(device), 1, threshold).cpu()
    above = masked & (conf > threshold)
    for c, m, row, a in zip(conf, masked, commit, above):
        if a.any():                 # everything above τ, which includes the row's best
            assert torch.equal(row, a)
        else:                       # nothing above τ: exactly one of the row's best, if anything is masked
            assert_valid_topk(row[None], c[None], m[None], 1)
    if not ties:
        assert torch.equal(commit, commit_threshold(conf, masked, threshold))


def test_cpu_tensors_stay_on_the_torch_path():
    assert not kernels.enabled_for(torch.zeros(2, 3))
