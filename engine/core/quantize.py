"""int8 matmuls for CPUs without fast bf16: the engine's fp32 fallback with its weights in int8.

Where the CPU has no AMX or AVX-512-BF16 (device.py), the engine runs fp32, and a span step is bound
by its matmuls, which at the span's shapes (16 or 32 rows) run far below the CPU's fp32 peak, while
fbgemm's dynamic int8 linear runs the same shapes several times faster (benchmarks/int8.py). So most linear layers and the vocabulary projection can run as fbgemm's int8 linear (`quantize_int8`
says which and why not the others): weights quantized once, symmetric per output channel;
activations quantized per call (dynamic, 7-bit, as fbgemm needs on CPUs without VNNI); int32
accumulation; fp32 out. Norms, attention and the KV cache stay fp32. One activation scale per call
means a row's product depends on the other rows of its call: a context prefilled in pieces (as the
user types) has slightly different keys and values than the same context prefilled whole, so an
int8 engine's completion can depend on what its context cache held before (fp32's does not).
A scale per row would remove that; torch's `_int_mm` on the CPU is far too slow for it.

The op is registered with torch.library, so the compiled steps (compiled.py) call it as one opaque
kernel: Dynamo cannot trace fbgemm's packed-weight object, so the packed weights live in a
process-wide registry and the graph holds their integer handle.
"""
from __future__ import annotations

import itertools
import warnings
import weakref

import torch
import torch.nn as nn

from .model import SpanfillModel

_PACKED: dict[int, object] = {}          # handle -> fbgemm packed weight
_HANDLES = itertools.count()
# activations in 7 bits: without VNNI, fbgemm adds pairs of u8 x s8 products in int16, which 8-bit
# activations can overflow (all layers in int8, first span step of 60 held-out contexts: KL from fp32
# 7.6 nats per position with 8 bits, 0.37 with 7)
REDUCE_RANGE = True


def int8_supported() -> bool:
    """Whether this torch build has the quantized CPU engine the int8 linear runs on (torch lists
    fbgemm, and x86 which uses it, only where the CPU has AVX2)."""
    return bool({"fbgemm", "x86"} & set(torch.backends.quantized.supported_engines))


# the op is defined with torch.library's low-level API: a `torch.library.custom_op` wrapper cost
# ~13 us more per call (eager, 32 x 320 x 320), 19 calls per span step
_LIB = torch.library.Library("spanfill", "DEF")
_LIB.define("int8_linear(Tensor x, int handle, int out_features) -> Tensor")


def _int8_linear(x: torch.Tensor, handle: int, out_features: int) -> torch.Tensor:
    """x: [..., K] fp32 -> [..., out_features] fp32 through the packed int8 weight `handle`."""
    return torch.ops.quantized.linear_dynamic(x.contiguous(), _PACKED[handle], REDUCE_RANGE)


_LIB.impl("int8_linear", _int8_linear, "CPU")


@torch.library.register_fake("spanfill::int8_linear")
def _(x: torch.Tensor, handle: int, out_features: int) -> torch.Tensor:
    return x.new_empty(*x.shape[:-1], out_features)


class Int8Linear(nn.Module):
    """A bias-free linear layer y = x W^T with W [N, K] held as packed int8, for every row count. One
    row (an AR token, one typed token's prefill) is bound by reading the weight, and a model past
    the L3 in fp32 (the shipped one: 41 MB of these weights, 10 MB in int8; an AVX2 EPYC has 32 MB)
    reads a quarter of it in int8: AR runs faster than in fp32 (benchmarks/int8.py)."""

    def __init__(self, weight: nn.Parameter):
        super().__init__()
        # the fp32 weight stays a parameter (the model's parameter count, its state dict); the
        # vocabulary projection's is the embedding's own, so it is neither copied nor counted twice
        self.weight = weight
        weight = weight.detach()
        self.out_features, self.in_features = weight.shape
        scale = (weight.abs().amax(1) / 127).clamp_min(1e-12).double()
        zero = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():   # torch 2.13 deprecates quantized tensors; fbgemm's packing takes one
            warnings.simplefilter("ignore", UserWarning)
            q = torch.quantize_per_channel(weight, scale, zero, 0, torch.qint8)
        self.handle = next(_HANDLES)
        _PACKED[self.handle] = torch.ops.quantized.linear_prepack(q, None)
        weakref.finalize(self, _PACKED.pop, self.handle, None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.spanfill.int8_linear(x, self.handle, self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


def quantize_int8(model: SpanfillModel) -> SpanfillModel:
    """In place: the blocks' attention projections and SwiGLU input projection, and the vocabulary
    projection, as Int8Linear. For inference only (no gradient flows through the int8 op); the
    embedding lookup stays fp32, and so does the SwiGLU output projection (w2): its input (the
    gated product) has a few channels far larger than the rest, which one activation scale per
    call cannot hold. Measured on the shipped model's first span step over 60 held-out contexts, KL
    divergence from fp32 per position: w2 alone in int8 0.31 nats (argmax of the first 8 positions
    unchanged at 91.0%), everything but w2 0.058 (96.9%)."""
    if model.embed.weight.device.type != "cpu" or model.embed.weight.dtype != torch.float32:
        raise ValueError(f"int8 matmuls are for fp32 models on the CPU, not {model.embed.weight.dtype} "
                         f"on {model.embed.weight.device}")
    with torch.no_grad():
        for block in model.layers:
            block.attn.wqkv = Int8Linear(block.attn.wqkv.weight)
            block.attn.wo = Int8Linear(block.attn.wo.weight)
            block.mlp.w13 = Int8Linear(block.mlp.w13.weight)
        model.head = Int8Linear(model.embed.weight)
    return model
