"""A public checkpoint's tokenizer, read from its own files without remote code.

`tokenizer.json` where the checkpoint has one; otherwise (the Dream family ships a slow Qwen2 BPE
through remote code: vocab.json + merges.txt + added_tokens.json, no tokenizer.json) the same BPE is
built with the `tokenizers` library as transformers' stock Qwen2 tokenizer builds it: NFC, Qwen2's
pre-tokenizer pattern, byte-level. Added tokens must land on the ids added_tokens.json gives them.

Text is encoded with special-token matching off (a file containing "<|mask|>" cannot inject a mask);
special tokens are inserted by id. Added tokens a checkpoint leaves non-special but shaped as control
tokens (Qwen's `<|fim_prefix|>`, `<tool_call>`, Qwen3's `<think>`: CONTROL_SHAPE) count as special:
text that spells one encodes as text, and the model's proposing one is banned with the others.
Byte-level vocabularies decode through an exact token -> bytes table, so a span cut inside a UTF-8
character drops the partial character instead of garbling it.
The interface is what the server's window cutting uses: encode, encode_batch, decode, line_counts.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

from tokenizers import AddedToken, Regex, decoders, normalizers, pre_tokenizers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers.models import BPE
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

from ..core.checkpoint import CheckpointError
from ..core.tokenizer import UNICODE_TO_BYTE, BPECodec
from .common import read_json


def qwen2_bpe(vocab: dict[str, int], merges: list[tuple[str, str]]) -> HFTokenizer:
    """The stock Qwen2 BPE pipeline over the given vocabulary and merges."""
    hf = HFTokenizer(BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    hf.normalizer = normalizers.NFC()
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.decoder = decoders.ByteLevel()
    return hf


def read_merges(path: Path) -> list[tuple[str, str]]:
    merges = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#version") or not line.strip():
            continue
        a, _, b = line.partition(" ")
        merges.append((a, b))
    return merges


def _added_tokens(directory: Path) -> dict[str, int]:
    """Added tokens and their ids from added_tokens.json and tokenizer_config.json's added_tokens_decoder."""
    found: dict[str, int] = {}
    if (directory / "tokenizer_config.json").is_file():
        decoder = read_json(directory / "tokenizer_config.json", "tokenizer_config.json").get("added_tokens_decoder") or {}
        if not isinstance(decoder, dict):
            raise CheckpointError(f"{directory}/tokenizer_config.json: added_tokens_decoder is not an object of "
                                  f"id -> token; download tokenizer_config.json again")
        found.update({_token(entry.get("content"), directory, "tokenizer_config.json"):
                      _token_id(tid, directory, "tokenizer_config.json")
                      for tid, entry in decoder.items() if isinstance(entry, dict)})
    if (directory / "added_tokens.json").is_file():
        found.update({_token(k, directory, "added_tokens.json"): _token_id(v, directory, "added_tokens.json")
                      for k, v in read_json(directory / "added_tokens.json", "added_tokens.json").items()})
    return found


def _token(content, directory: Path, what: str) -> str:
    if not isinstance(content, str) or not content:
        raise CheckpointError(f"{directory}/{what}: an added token {content!r} is not a string; download {what} again")
    return content


def _token_id(value, directory: Path, what: str) -> int:
    """An added token's id: an integer, or (tokenizer_config.json's keys) a string of one."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"[0-9]+", str(value)):
        raise CheckpointError(f"{directory}/{what}: token id {value!r} is not a non-negative integer; "
                              f"download {what} again")
    return int(value)


CONTROL_SHAPE = re.compile(r"<[^<>\s]+>")


def _mark_control(hf: HFTokenizer) -> None:
    """Make the non-special added tokens shaped as control tokens special (their ids stay)."""
    plain = [t.content for t in hf.get_added_tokens_decoder().values()
             if not t.special and CONTROL_SHAPE.fullmatch(t.content)]
    if plain:
        hf.add_special_tokens([AddedToken(content, special=True, normalized=False) for content in plain])


def _add(hf: HFTokenizer, tokens: dict[str, int], directory: Path) -> None:
    for content, tid in sorted(tokens.items(), key=lambda kv: kv[1]):
        if hf.token_to_id(content) is None:
            hf.add_special_tokens([AddedToken(content, special=True, normalized=False)])
        if hf.token_to_id(content) != tid:
            raise CheckpointError(f"{directory}: token {content!r} has id {hf.token_to_id(content)} in the tokenizer "
                                  f"files but {tid} in added_tokens.json; the tokenizer files disagree")


class FamilyTokenizer(BPECodec):
    def __init__(self, hf: HFTokenizer):
        super().__init__(hf)
        added = {t.content for t in hf.get_added_tokens_decoder().values()}
        self.byte_level = _is_byte_level(hf)
        self._bytes: list[bytes] | None = None
        if self.byte_level:
            table = [b""] * self.vocab_size
            for token, tid in hf.get_vocab().items():
                if token not in added and tid < self.vocab_size and all(c in UNICODE_TO_BYTE for c in token):
                    table[tid] = bytes(UNICODE_TO_BYTE[c] for c in token)
            self._bytes = table

    @classmethod
    def from_directory(cls, directory: Path) -> "FamilyTokenizer":
        directory = Path(directory)
        added = _added_tokens(directory)
        try:
            if (directory / "tokenizer.json").is_file():
                hf = HFTokenizer.from_file(str(directory / "tokenizer.json"))
            elif (directory / "vocab.json").is_file() and (directory / "merges.txt").is_file():
                vocab = read_json(directory / "vocab.json", "vocab.json")
                hf = qwen2_bpe(vocab, read_merges(directory / "merges.txt"))
            else:
                raise CheckpointError(f"{directory} has no tokenizer files (tokenizer.json, or vocab.json and "
                                      "merges.txt); download them with the weights")
        except CheckpointError:
            raise
        except Exception as err:    # tokenizers raises bare Exceptions for corrupt files
            raise CheckpointError(f"the tokenizer files in {directory} cannot be read ({err}); download them again") from err
        _add(hf, added, directory)
        _mark_control(hf)
        return cls(hf)

    def token_id(self, token: str) -> int | None:
        return self.hf.token_to_id(token)

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        if self._bytes is not None:
            table = self._bytes
            return b"".join(table[i] for i in ids if 0 <= i < len(table))
        return self.hf.decode(list(ids), skip_special_tokens=True).encode("utf-8")

    def decode(self, ids: Iterable[int]) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors="ignore")


def _is_byte_level(hf: HFTokenizer) -> bool:
    """Whether the tokenizer decodes byte-level (GPT-2 style) tokens: then its vocabulary maps to bytes."""
    decoder = json.loads(hf.to_str()).get("decoder") or {}
    kinds = [decoder.get("type")] + [d.get("type") for d in decoder.get("decoders", [])]
    return "ByteLevel" in kinds
