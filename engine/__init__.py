"""spanfill.engine: the diffusion infill engine (tokenizer, model, context cache, denoiser, training).

The server imports only what is exported here.
"""
from .api import CancelledError, CompletionRequest, CompletionResult, Timings
from .checkpoint import CheckpointError
from .engine import Engine
from .prompt import Snippet

__all__ = ["Engine", "CompletionRequest", "CompletionResult", "Timings", "CancelledError", "CheckpointError", "Snippet"]
