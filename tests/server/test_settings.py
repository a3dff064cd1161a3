"""Settings: defaults, camelCase/snake_case keys, the "spanfill" section, invalid values ignored."""
import dataclasses

import pytest

from spanfill.server.settings import VALIDATORS, Settings, apply_settings, as_client_dict


def test_every_field_has_a_validator():
    assert set(VALIDATORS) == {f.name for f in dataclasses.fields(Settings)}


def test_camel_case_under_section_and_snake_case_flat_are_both_read():
    nested, problems = apply_settings(Settings(), {"spanfill": {"spanLength": 24, "debounceMs": 0}})
    flat, _ = apply_settings(Settings(), {"span_length": 24, "debounce_ms": 0})
    assert problems == []
    assert nested == flat
    assert (nested.span_length, nested.debounce_ms) == (24, 0)


def test_invalid_values_are_reported_and_the_previous_value_kept():
    current = Settings(steps=4)
    new, problems = apply_settings(current, {"steps": 0, "rule": "greedy", "device": "tpu", "spanLength": True,
                                             "threshold": 1.5, "colour": "red", "debounceMs": 10})
    assert new.steps == 4 and new.rule == "content" and new.device == "auto"
    assert new.span_length is None and new.threshold == 0.9
    assert new.debounce_ms == 10                       # valid values in the same message still apply
    assert len(problems) == 6
    assert any("steps=0" in p and "1 to 128" in p for p in problems)
    assert any("'colour'" in p and "spanLength" in p for p in problems)   # lists what is known


def test_the_deadline_is_milliseconds_or_null():
    new, problems = apply_settings(Settings(), {"deadlineMs": 120})
    assert problems == [] and new.deadline_ms == 120
    for bad in (0, -5, 2.5, "fast", True):
        kept, problems = apply_settings(new, {"deadlineMs": bad})
        assert kept.deadline_ms == 120 and len(problems) == 1 and "1 to 60000 or null" in problems[0]
    assert apply_settings(new, {"deadlineMs": None})[0].deadline_ms is None


def test_null_means_model_default_and_empty_model_means_shipped():
    new, problems = apply_settings(Settings(span_length=32, model="/m"), {"spanLength": None, "model": ""})
    assert problems == [] and new.span_length is None and new.model is None


def test_enable_per_language():
    s, _ = apply_settings(Settings(), {"enable": {"*": False, "python": True}})
    assert s.enabled_for("python") and not s.enabled_for("markdown")
    s, _ = apply_settings(Settings(), {"enable": False})
    assert not s.enabled_for("python")
    assert Settings().enabled_for("anything")


def test_engine_key_changes_only_with_model_device_dtype_threads():
    base = Settings()
    assert dataclasses.replace(base, steps=2).engine_key == base.engine_key
    assert dataclasses.replace(base, device="cpu").engine_key != base.engine_key
    assert dataclasses.replace(base, threads=3).engine_key != base.engine_key


@pytest.mark.parametrize("cores,threads", [(1, 1), (2, 1), (8, 7)])
def test_threads_default_to_one_core_fewer_than_torch_would_use(monkeypatch, cores, threads):
    # the conftest pins torch to one thread, so the core count torch read at import is set here
    monkeypatch.setattr("spanfill.engine.TORCH_DEFAULT_THREADS", cores)
    assert Settings().engine_threads == threads
    assert Settings(threads=cores).engine_threads == cores          # a setting is taken as it is


def test_threads_are_validated():
    new, problems = apply_settings(Settings(), {"threads": 3})
    assert problems == [] and new.engine_threads == 3
    kept, problems = apply_settings(new, {"threads": 0})
    assert kept.threads == 3 and len(problems) == 1 and "threads=0" in problems[0]
    assert apply_settings(new, {"threads": None})[0].threads is None


def test_client_dict_is_camel_case():
    d = as_client_dict(Settings())
    assert d["spanLength"] is None and d["debounceMs"] == 0 and "span_length" not in d


def test_check_takes_auto_an_acceptance_or_null():
    for value, expected in (("auto", "auto"), (0.3, 0.3), (1, 1.0), (None, None)):
        new, problems = apply_settings(Settings(), {"check": value})
        assert problems == [] and new.check == expected
    new, problems = apply_settings(Settings(check=0.2), {"check": 2})
    assert new.check == 0.2 and len(problems) == 1 and "from 0 to 1" in problems[0]
    new, problems = apply_settings(Settings(), {"check": "always"})
    assert new.check == "auto" and len(problems) == 1


def test_unset_model_device_threads_mean_the_command_lines():
    cli = Settings(model="/cli", device="cpu", threads=2)
    new, problems = apply_settings(Settings(model="/m", device="cuda", threads=4),
                                   {"model": None, "device": "auto", "threads": None}, cli)
    assert not problems
    assert (new.model, new.device, new.threads) == ("/cli", "cpu", 2)
    assert apply_settings(cli, {"model": ""}, cli)[0].model == "/cli"
    named, _ = apply_settings(cli, {"model": "/x", "device": "cuda", "threads": 1}, cli)
    assert (named.model, named.device, named.threads) == ("/x", "cuda", 1)
    assert apply_settings(cli, {"model": None, "device": "auto"})[0].model is None     # no command line
