"""Server settings: one frozen dataclass with defaults, and validation of what editors send.

Editors send settings in `initializationOptions` and `workspace/didChangeConfiguration`, either flat
or under a `"spanfill"` section, with camelCase (`spanLength`) or snake_case (`span_length`) keys.
`apply_settings` returns the new settings plus one message per rejected value; a rejected value
leaves the previous one in place, so a typo never takes the server down.

`spanfill serve --model/--device/--threads` set the server's own defaults for those three: a client
that sends their "unset" value (model null or "", device "auto", threads null; the VS Code extension
sends these when its settings are left empty) gets the command line's, not the built-in ones.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from spanfill.engine import DTYPES, MAX_CANDIDATES, MAX_SPAN, MAX_STEPS, RULES

SECTION = "spanfill"
DEVICES = re.compile(r"^(auto|cpu|cuda(:\d+)?|mps)$")


@dataclass(frozen=True)
class Settings:
    model: str | None = None                 # checkpoint directory; None = the shipped model
    device: str = "auto"
    dtype: str = "auto"
    threads: int | None = None               # CPU threads for the engine; None = one fewer than the cores
    span_length: int | None = None           # tokens per denoised span; None = the model's default (16 at a single-line cursor)
    steps: int | None = None                 # denoising steps per span; None = the model's default
    rule: str = "content"                    # commit rule (engine/decoding/denoise.py): content, fixed or threshold
    threshold: float = 0.9                   # confidence for rule="threshold"
    check: float | str | None = "auto"       # AR check of diffusion's draft (engine/decoding/check.py): the
                                             # acceptance 0..1, "auto" (at single-line cursors: 0.03, the
                                             # draft's end 0.3), or null: off
    debounce_ms: int = 0                     # editors debounce already; superseded work stops between steps
    deadline_ms: int | None = None           # an engine call's time budget: when spent, the span commits every
                                             # position left in one step (the AR check/fallback stop too)
    max_context_tokens: int | None = None    # prefix + suffix + snippets; None = the model's budget
    candidates: int = 3                      # items for an explicitly invoked request (cycling)
    snippet_files: int = 3                   # other open documents offered as <|file|> context
    completion_fallback: bool = False        # also answer textDocument/completion
    line_breaks: str = "document"            # a suggestion's line breaks: the document's own (CRLF in a CRLF
                                             # file), or "lf" for clients that split inserted text on \n
                                             # alone (Neovim: a \r would stay in the buffer)
    enable: Mapping[str, bool] = field(default_factory=lambda: {"*": True})  # per languageId

    def enabled_for(self, language_id: str) -> bool:
        return bool(self.enable.get(language_id, self.enable.get("*", True)))

    @property
    def decoding_key(self) -> tuple:
        """The settings that make the engine answer differently (a typing-through answer from before
        they changed is not served)."""
        return (self.span_length, self.steps, self.rule, self.threshold, self.check, self.deadline_ms,
                self.max_context_tokens, self.snippet_files)

    @property
    def engine_key(self) -> tuple[str | None, str, str, int | None]:
        """The settings that need the model reloaded when they change (compiled steps bake in the
        thread count)."""
        return self.model, self.device, self.dtype, self.threads

    @property
    def engine_threads(self) -> int:
        """`threads`, or by default one core fewer than torch would use (at least one): the editor
        and the rest of the machine keep a core. With every core in its pool, a busy machine made the
        engine's calls far slower at the tail (its parallel loops wait at barriers for a thread another
        process pushed off its core; benchmarks/replay.py --background-load measures it)."""
        if self.threads is not None:
            return self.threads
        from spanfill.engine import TORCH_DEFAULT_THREADS   # imports torch: not when only parsing settings
        return max(1, TORCH_DEFAULT_THREADS - 1)


def _int_in(lo: int, hi: int, optional: bool = False) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"expected an integer from {lo} to {hi}" + (" or null" if optional else ""))
        return value
    return check


def _one_of(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return value
    return check


def _model(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a path to a model directory, or null for the shipped model")
    return value


def _device(value: Any) -> str:
    if not isinstance(value, str) or not DEVICES.match(value):
        raise ValueError("expected auto, cpu, cuda, cuda:N or mps")
    return value


def _threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value <= 1.0:
        raise ValueError("expected a number in (0, 1]")
    return float(value)


def _check(value: Any) -> float | str | None:
    if value is None or value == "auto":
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError('expected "auto", a number from 0 to 1 (the AR probability a draft token needs), or null (off)')
    return float(value)


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _enable(value: Any) -> dict[str, bool]:
    if isinstance(value, bool):
        return {"*": value}
    if not isinstance(value, Mapping) or not all(isinstance(v, bool) for v in value.values()):
        raise ValueError('expected true/false or a map from languageId to true/false, e.g. {"*": true, "markdown": false}')
    return dict(value)


VALIDATORS: dict[str, Callable[[Any], Any]] = {
    "model": _model,
    "device": _device,
    "dtype": _one_of(DTYPES),
    "threads": _int_in(1, 256, optional=True),
    "span_length": _int_in(1, MAX_SPAN, optional=True),
    "steps": _int_in(1, MAX_STEPS, optional=True),
    "rule": _one_of(RULES),
    "threshold": _threshold,
    "check": _check,
    "debounce_ms": _int_in(0, 2000),
    "deadline_ms": _int_in(1, 60000, optional=True),
    "max_context_tokens": _int_in(64, 8192, optional=True),
    "candidates": _int_in(1, MAX_CANDIDATES),
    "snippet_files": _int_in(0, 16),
    "completion_fallback": _bool,
    "line_breaks": _one_of(("document", "lf")),
    "enable": _enable,
}


def as_client_dict(settings: Settings) -> dict[str, Any]:
    """The settings with the camelCase keys editors use (for `spanfill/status`)."""
    return {_camel(k): v for k, v in dataclasses.asdict(settings).items()}


def _camel(name: str) -> str:
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name)


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", key).lower()


def _section(raw: Any) -> Mapping[str, Any]:
    if isinstance(raw, Mapping) and isinstance(raw.get(SECTION), Mapping):
        return raw[SECTION]
    return raw if isinstance(raw, Mapping) else {}


# the settings the command line sets (serve.py), whose unset value means the command line's
COMMAND_LINE = ("model", "device", "threads")
UNSET = Settings()


def apply_settings(current: Settings, raw: Any, defaults: Settings = UNSET) -> tuple[Settings, list[str]]:
    """Merge `raw` into `current`; returns the new settings and a message for every ignored value.
    `defaults`: the server's starting settings (its command line), which a COMMAND_LINE setting sent
    with its unset value falls back to."""
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in _section(raw).items():
        name = _snake(key)
        check = VALIDATORS.get(name)
        if check is None:
            problems.append(f"spanfill: unknown setting {key!r} ignored; known settings: "
                            f"{', '.join(sorted(map(_camel, VALIDATORS)))}")
            continue
        try:
            changes[name] = check(value)
        except ValueError as err:
            problems.append(f"spanfill: setting {key}={value!r} ignored: {err}")
            continue
        if name in COMMAND_LINE and changes[name] == getattr(UNSET, name):
            changes[name] = getattr(defaults, name)
    return dataclasses.replace(current, **changes), problems
