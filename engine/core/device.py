"""Device and dtype selection: bf16 where the hardware runs it fast, fp32 otherwise, with most
matmuls in int8 on such a CPU (quantize.py).

On CPU, bf16 matmuls are only fast with AMX or AVX-512-BF16 (several times fp32 there);
elsewhere bf16 is emulated and slower than fp32, so we detect the ISA instead of assuming.
"""
from __future__ import annotations

import functools
import logging
import re

import torch

from ..api import DTYPES

log = logging.getLogger(__name__)
# torch's own choice of intra-op threads (the physical cores), read before anything changes it
TORCH_DEFAULT_THREADS = torch.get_num_threads()
# every dtype name but "auto" (api.DTYPES lists them for settings); int8 is an fp32 model with int8 matmuls
TORCH_DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp32": torch.float32, "float32": torch.float32,
                "fp16": torch.float16, "float16": torch.float16, "int8": torch.float32}
assert set(TORCH_DTYPES) | {"auto"} == set(DTYPES)


@functools.lru_cache(maxsize=None)
def cpu_has_fast_bf16() -> bool:
    try:
        isa = torch.backends.cpu.get_cpu_capability()  # e.g. "AVX512", "AVX512_BF16"? depends on build
    except Exception:
        isa = ""
    flags = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = line
                    break
    except OSError:
        pass
    fast = any(f in flags.split() for f in ("amx_bf16", "avx512_bf16"))
    log.debug("cpu capability %s, fast bf16: %s", isa, fast)
    return fast


def pick_device(name: str = "auto") -> torch.device:
    """auto, cpu, cuda, cuda:N or mps, where this machine has it; ValueError naming what it has."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(name, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", name):
        raise ValueError(f"device {name!r} is not one of auto, cpu, cuda, cuda:N, mps")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available; use --device cpu")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r} requested but this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s): cuda:0..cuda:{torch.cuda.device_count() - 1}")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {name!r} requested but MPS (Apple GPU) is not available; use --device cpu")
    return device


def pick_dtype(device: torch.device, name: str = "auto") -> torch.dtype:
    if name != "auto":
        if name not in TORCH_DTYPES:
            raise ValueError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")
        return TORCH_DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32


def wants_int8(device: torch.device, name: str = "auto") -> bool:
    """Whether the fp32 model's matmuls run in int8 (quantize.py): asked for by name ("int8"), or by
    default ("auto") on a CPU without fast bf16, where the engine would otherwise run them in fp32."""
    from .quantize import int8_supported
    if name == "int8":
        if device.type != "cpu":
            raise ValueError(f"dtype int8 is for the CPU, not {device}; use bf16 or fp16 there")
        if not int8_supported():
            raise ValueError("dtype int8 needs torch's quantized CPU engine (fbgemm), which this torch build "
                             "lacks; use fp32")
        return True
    return name == "auto" and device.type == "cpu" and not cpu_has_fast_bf16() and int8_supported()


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    dtype = pick_dtype(device)
    return None if dtype == torch.float32 else dtype


def set_threads(threads: int) -> None:
    """Use `threads` intra-op threads from now on, process-wide (torch's setting is global). Steps
    compiled afterwards bake this count into their loops, so set it before compiling."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer, at least 1; got {threads!r}")
    torch.set_num_threads(threads)
