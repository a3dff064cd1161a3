"""The optimiser steps `spanfill train`, the GPU run and the throughput benchmark run: `TrainStep`
(the dense objective: losses, backward, clipping, a fused AdamW update; compiled) and `HeadStep`
(the length head alone, the body frozen)."""
from __future__ import annotations

import torch

from ..core.model import SpanfillModel
from .objective import Batch, length_loss, loss_index, loss_terms, sparse_loss_terms

# the length head's share of the loss: its cross-entropy is a few nats against the body's ~4, and
# its gradient reaches every layer through one position per sequence
LENGTH_WEIGHT = 0.1


def make_loss_fn(model: SpanfillModel, device: torch.device, amp_dtype, compile_: bool, dynamic: bool = False,
                 sparse: bool | None = None, fused_attention: bool | None = None):
    """(tokens, positions, mask, ar_targets, span_targets, span_masked, t, length_lo, length_censored, C, L)
    -> (ar, diffusion, length); length is 0 for a model without a length head.

    Compiled, the elementwise work around the matmuls (RMSNorm, RoPE, SwiGLU, casts, softmax) fuses,
    which on a small CPU is much of a step's time: at one compile per shape, or (dynamic=True) one
    graph whose batch and sequence sizes are symbols, for batches of varying context width.
    sparse: the vocabulary projection only where a loss is (`sparse_loss_terms`; its sizes vary batch
    by batch, so by default eager or dynamic only); fused_attention: see `SpanfillModel.hidden_train`."""
    sparse = (not compile_ or dynamic) if sparse is None else sparse

    def encode(tokens, positions, mask, C: int):
        """Final hidden states, and the length head's logits where the model has one: the context
        ends at <|middle|>, index C - 1 (left-padded to width C)."""
        h = model.hidden_train(tokens, positions, mask, fused_attention)
        return h, None if model.length_head is None else model.length_logits(h[:, C - 1])

    def dense_fn(tokens, positions, mask, ar_targets, span_targets, span_masked, t, length_lo, length_censored,
                 C: int, L: int):
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            h, length_logits = encode(tokens, positions, mask, C)
            logits = model.logits(h)
        return loss_terms(logits, ar_targets, span_targets, span_masked, t, C, L, length_logits, length_lo, length_censored)

    def sparse_fn(tokens, positions, mask, ar_targets, span_targets, t, length_lo, length_censored, ar_index, span_index,
                  C: int, L: int):
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            h, length_logits = encode(tokens, positions, mask, C)
            return sparse_loss_terms(model, h, ar_targets, span_targets, t, ar_index, span_index, C, L,
                                     length_logits, length_lo, length_censored)

    if not sparse:
        return torch.compile(dense_fn, dynamic=dynamic) if compile_ else dense_fn
    inner = torch.compile(sparse_fn, dynamic=dynamic) if compile_ else sparse_fn

    def loss_fn(tokens, positions, mask, ar_targets, span_targets, span_masked, t, length_lo, length_censored,
                C: int, L: int):
        ar_index, span_index = loss_index(ar_targets, span_masked)   # data-dependent sizes: outside the graph
        return inner(tokens, positions, mask, ar_targets, span_targets, t, length_lo, length_censored,
                     ar_index, span_index, C, L)
    return loss_fn


def make_optimizer(model: SpanfillModel, lr: float, device: torch.device) -> torch.optim.Optimizer:
    # fused: one kernel per parameter group instead of a dozen elementwise ops per tensor
    fused = device.type in ("cpu", "cuda")
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=fused)


class TrainStep:
    """One optimiser step of the dense objective over `accum` batches: losses, backward, gradient
    clipping at 1.0, the update. The one step `spanfill train`, the GPU run and the throughput
    benchmark all run. compile_: the loss function through torch.compile; dynamic: its graph takes
    any batch shape (bucketed batches) rather than one graph per shape."""

    def __init__(self, model: SpanfillModel, opt: torch.optim.Optimizer, device: torch.device, amp_dtype,
                 compile_: bool, dynamic: bool = False, sparse: bool | None = None, fused_attention: bool | None = None):
        self.model, self.opt, self.device = model, opt, device
        self.loss_fn = make_loss_fn(model, device, amp_dtype, compile_, dynamic, sparse, fused_attention)

    def __call__(self, batches: list[Batch]) -> dict:
        ar_sum = diff_sum = length_sum = 0.0
        tokens = 0
        for batch in batches:
            tensors = [x.to(self.device, non_blocking=True) for x in (
                batch.tokens, batch.positions, batch.mask, batch.ar_targets, batch.span_targets, batch.span_masked,
                batch.t, batch.length_lo, batch.length_censored)]
            ar, diff, length = self.loss_fn(*tensors, batch.context_width, batch.span_length)
            ((ar + diff + LENGTH_WEIGHT * length) / len(batches)).backward()
            ar_sum += ar.item() / len(batches)
            diff_sum += diff.item() / len(batches)
            length_sum += length.item() / len(batches)
            tokens += batch.real_tokens
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0).item()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        result = {"ar_loss": ar_sum, "diffusion_loss": diff_sum, "grad_norm": grad_norm, "tokens": tokens}
        if self.model.length_head is not None:
            result["length_loss"] = length_sum
        return result


class HeadStep:
    """A step that fits only the length head, the body frozen: the causal context alone is encoded
    (no span, no vocabulary projection, no backward through the body), so a trained model gets a
    length head for a fraction of a training step's cost. Its record has the length loss alone."""

    def __init__(self, model: SpanfillModel, opt: torch.optim.Optimizer, device: torch.device, amp_dtype):
        self.model, self.opt, self.device, self.amp_dtype = model, opt, device, amp_dtype
        model.requires_grad_(False)
        model.length_head.requires_grad_(True)

    def __call__(self, batches: list[Batch]) -> dict:
        length_sum, tokens = 0.0, 0
        for batch in batches:
            C = batch.context_width
            with torch.no_grad(), torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None):
                h = self.model.hidden_train(batch.tokens[:, :C].to(self.device), batch.positions[:, :C].to(self.device),
                                            batch.mask[:, :, :C, :C].to(self.device))[:, C - 1].float()   # [B, D]
            loss = length_loss(self.model.length_logits(h), batch.length_lo.to(self.device),
                               batch.length_censored.to(self.device))
            (loss / len(batches)).backward()
            length_sum += loss.item() / len(batches)
            tokens += int(batch.mask[:, 0, C - 1, :C].sum())       # the real context tokens <|middle|> sees
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.length_head.parameters(), 1.0).item()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return {"length_loss": length_sum, "grad_norm": grad_norm, "tokens": tokens}
