"""`spanfill batch` and `spanfill data` through the `spanfill` entry point, as the README runs them:
files in, files and counts out, and an error that names what to fix."""
import json

import pytest

from spanfill.engine import CompletionRequest, Engine, Tokenizer, read_split
from spanfill.engine.testing import SAMPLE_PREFIX, SAMPLE_SUFFIX
from spanfill.server.cli import main as spanfill

TASKS = [{"id": "add", "prefix": SAMPLE_PREFIX, "suffix": SAMPLE_SUFFIX},
         {"id": "return", "prefix": "def add(a, b):\n    return ", "suffix": "\n"},
         {"id": "no suffix", "prefix": "import os\n"}]                 # "suffix" may be left out


def run(*argv) -> int:
    return spanfill([str(a) for a in argv])


@pytest.mark.parametrize("mode", ["diffusion", "ar"])
def test_spanfill_batch_raw_writes_each_task_with_the_engines_middle(tiny_dir, tmp_path, capsys, mode):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS) + "\n")      # a blank line is skipped
    assert run("batch", tasks, out, "--model", tiny_dir, "--device", "cpu", "--eager",
               "--steps", 2, "--span", 8, "--mode", mode, "--raw") == 0
    assert f"wrote 3 completions to {out}" in capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    engine = Engine.load(tiny_dir, device="cpu", compile=False)                # as batch loads it, tasks in the same order
    for task, row in zip(TASKS, rows, strict=True):
        want = engine.complete(CompletionRequest(prefix=task["prefix"], suffix=task.get("suffix", ""), steps=2,
                                                 span_length=8, mode=mode)).texts[0]
        assert row == {**task, "completion": want, "raw": want, "latency_ms": row["latency_ms"]} and row["latency_ms"] > 0
    assert any(row["completion"] for row in rows)                              # not only empty texts compared


LINE_TASK = {"id": "line", "prefix": "def area(r):\n    pi = 3.14159\n", "suffix": "    return pi * r ** 2\n"}


def test_spanfill_batch_writes_what_the_editor_would_insert(shipped_model, tmp_path):
    """By default "completion" is the server's answer: its post-processing of the engine's middle (here, at
    column 0 of a line with code: whole lines with their break), AR again where diffusion shows nothing
    (or too little: Shown.would_show)."""
    from spanfill.engine.decoding.postprocess import Cursor, Shown, finish
    rows = {}
    for language in ("python", "text"):
        tasks, out = tmp_path / f"{language}.jsonl", tmp_path / f"{language}.out.jsonl"
        tasks.write_text("".join(json.dumps({**t, "language": language}) + "\n" for t in [*TASKS, LINE_TASK]))
        assert run("batch", tasks, out, "--model", shipped_model, "--device", "cpu", "--eager") == 0
        rows[language] = [json.loads(line) for line in out.read_text().splitlines()]
    engine = Engine.load(shipped_model, device="cpu", compile=False)
    for language, python in (("python", True), ("text", False)):
        for task, row in zip([*TASKS, LINE_TASK], rows[language], strict=True):
            cursor = Cursor(task["prefix"], task.get("suffix", ""))
            result = engine.complete(CompletionRequest(prefix=task["prefix"], suffix=task.get("suffix", ""),
                                                       would_show=Shown(cursor, python).would_show))
            assert row["raw"] == result.texts[0]
            assert row["completion"] == (finish(result.texts[0], cursor, python) or "")
    line = rows["python"][-1]["completion"]
    assert line == "" or (line.endswith("\n") and line.count("\n") == 1), repr(line)


def test_spanfill_batch_refuses_a_language_that_is_not_a_string(tiny_dir, tmp_path, capsys):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    tasks.write_text(json.dumps({**TASKS[0], "language": 3}) + "\n")
    assert run("batch", tasks, out, "--model", tiny_dir, "--device", "cpu", "--eager") == 2
    assert f'{tasks}:1: "language" must be a string' in capsys.readouterr().err


def test_spanfill_batch_names_the_line_it_cannot_read(tiny_dir, tmp_path, capsys):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    tasks.write_text(json.dumps(TASKS[0]) + "\n" + json.dumps({"prefix": 1}) + "\n")
    assert run("batch", tasks, out, "--model", tiny_dir, "--device", "cpu", "--eager") == 2
    assert f'{tasks}:2: expected an object with string "prefix" and "suffix"' in capsys.readouterr().err
    assert not out.exists()


def test_spanfill_batch_never_writes_over_its_input_or_leaves_a_partial_output(tiny_dir, tmp_path, capsys,
                                                                              monkeypatch):
    tasks, out = tmp_path / "tasks.jsonl", tmp_path / "out.jsonl"
    text = "".join(json.dumps(t) + "\n" for t in TASKS)
    tasks.write_text(text)
    with pytest.raises(SystemExit) as exit_:
        run("batch", tasks, tasks, "--model", tiny_dir, "--eager")
    assert exit_.value.code == 2 and "is the input" in capsys.readouterr().err and tasks.read_text() == text
    with pytest.raises(SystemExit):
        run("batch", tasks, out, "--model", tiny_dir, "--eager", "--steps", 0)      # refused before any work
    assert "--steps 0 is out of range" in capsys.readouterr().err and not out.exists()
    out.write_text("an earlier run's rows\n")
    assert run("batch", tasks, out, "--model", tmp_path / "no-model", "--eager") == 2
    assert "does not exist" in capsys.readouterr().err
    assert out.read_text() == "an earlier run's rows\n" and sorted(tmp_path.iterdir()) == sorted([tasks, out])

    from spanfill.engine.tools import batch

    def interrupted(*args, **kw):           # Ctrl-C after the first row was written
        yield {"id": "add", "text": "x"}
        raise KeyboardInterrupt
    monkeypatch.setattr(batch, "run", interrupted)
    assert run("batch", tasks, out, "--model", tiny_dir, "--eager") == 130
    assert out.read_text() == "an earlier run's rows\n" and sorted(tmp_path.iterdir()) == sorted([tasks, out])


def test_spanfill_batch_refuses_an_output_it_cannot_write_before_loading_a_model(tiny_dir, tmp_path, capsys,
                                                                                 monkeypatch):
    """A missing folder or a folder for the output failed only after the model loaded and compiled."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    monkeypatch.setattr(Engine, "load", lambda *a, **k: pytest.fail("the model loaded"))
    for out, says in ((tmp_path / "none" / "out.jsonl", "does not exist"), (tmp_path, "a folder, not a file")):
        with pytest.raises(SystemExit):
            run("batch", tasks, out, "--model", tiny_dir, "--eager")
        assert says in capsys.readouterr().err


def test_spanfill_batch_writes_through_a_link_to_its_target(tiny_dir, tmp_path, capsys):
    tasks, target, link = tmp_path / "tasks.jsonl", tmp_path / "target.jsonl", tmp_path / "out.jsonl"
    tasks.write_text(json.dumps(TASKS[1]) + "\n")
    target.write_text("")
    link.symlink_to(target)
    assert run("batch", tasks, link, "--model", tiny_dir, "--device", "cpu", "--eager", "--raw") == 0
    assert link.is_symlink() and json.loads(target.read_text())["id"] == "return"

def test_command_line_errors_are_one_line_not_a_traceback(tiny_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPANFILL_TRACEBACK", raising=False)
    assert run("train", "--data", tmp_path / "missing", "--out", tmp_path / "run") == 1
    err = capsys.readouterr().err
    assert err.startswith("spanfill train: ") and "Traceback" not in err and "missing" in err
    with pytest.raises(SystemExit):
        run("train", "--data", tmp_path, "--out", tmp_path / "run", "--batch", 0)
    assert "argument --batch: 0 is less than 1" in capsys.readouterr().err


def test_a_model_folder_is_never_written_over_the_working_directory_or_root(tiny_dir, tmp_path, monkeypatch):
    from spanfill.engine.core.checkpoint import CheckpointError, load_model, save_model
    model, tok = load_model(tiny_dir)
    save_model(tmp_path / "m", model, tok)
    monkeypatch.chdir(tmp_path / "m")
    with pytest.raises(CheckpointError, match="the folder you are working in"):
        save_model(".", model, tok)              # each save replaces the folder: not the one the process is in
    with pytest.raises(CheckpointError, match="the folder you are working in"):
        save_model(tmp_path, model, tok)
    with pytest.raises(CheckpointError, match="name a folder"):
        save_model("/", model, tok)
    assert load_model(tmp_path / "m")[0].cfg == model.cfg


def test_a_save_stopped_between_its_two_renames_is_put_back(tiny_dir, tmp_path):
    from spanfill.engine.core.checkpoint import load_model, save_model
    model, tok = load_model(tiny_dir)
    run_dir = tmp_path / "run"
    save_model(run_dir, model, tok)
    (run_dir / "train_state.json").write_text("{}")
    (run_dir.with_name("run.tmp")).mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "train_state.json"):
        (run_dir.with_name("run.tmp") / name).write_bytes((run_dir / name).read_bytes())
    run_dir.rename(run_dir.with_name("run.old"))  # as if stopped after the first rename
    assert load_model(run_dir)[0].cfg == model.cfg and (run_dir / "train_state.json").exists()


def module_source(i: int) -> str:
    body = "\n".join(f"def f_{i}_{j}(x):\n    return x * {(i * 7 + j) % 97} + {j}\n" for j in range(10))
    return f'"""Module {i}."""\nimport os\n\n{body}'


def test_spanfill_data_refuses_a_tokenizer_it_cannot_read_before_building(tmp_path, capsys):
    """A wrong --count-tokens path surfaced after the whole corpus was built, as a traceback."""
    src, out = tmp_path / "src", tmp_path / "data"
    src.mkdir()
    (src / "a.py").write_text(module_source(0))
    assert run("data", "--out", out, src, "--count-tokens", tmp_path / "none.json") == 2
    assert "--count-tokens" in capsys.readouterr().err and not out.exists()


def test_spanfill_data_writes_disjoint_splits_and_prints_their_counts(tiny_dir, tmp_path, capsys):
    src, out = tmp_path / "src", tmp_path / "data"
    (src / "pkg").mkdir(parents=True)
    for i in range(100):
        (src / "pkg" / f"mod_{i}.py").write_text(module_source(i))
    (src / "pkg" / "z_copy.py").write_text(module_source(1))                            # a duplicate, read last
    (src / "gen_pb2.py").write_text("# Generated by the protocol buffer compiler.  DO NOT EDIT!\n" + "x = 1\n" * 100)
    (src / "notes.txt").write_text(module_source(2) + "\n# not Python\n")               # not a *.py file
    assert run("data", "--out", out, src, "--count-tokens", tiny_dir / "tokenizer.json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((out / "stats.json").read_text())
    assert printed["rejected"] == {"duplicate": 1, "generated": 1}
    train, held = read_split(out / "train.jsonl"), read_split(out / "held_out.jsonl")
    assert {f.path for f in train} | {f.path for f in held} == {f"src/pkg/mod_{i}.py" for i in range(100)}
    assert not {f.path for f in train} & {f.path for f in held}
    tok = Tokenizer.from_file(tiny_dir / "tokenizer.json")
    for split, files in (("train", train), ("held_out", held)):
        assert printed[split]["files"] == len(files)
        assert printed[split]["tokens"] == sum(len(tok.encode(f.text)) for f in files)


def test_spanfill_data_refuses_a_source_that_is_not_a_directory(tmp_path, capsys):
    assert run("data", "--out", tmp_path / "data", tmp_path / "missing") == 2
    assert f"not a directory: {tmp_path / 'missing'}" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_spanfill_eval_refuses_what_it_cannot_do_before_loading_a_model(tiny_dir, tmp_path, capsys, monkeypatch):
    """Mistakes that ran the whole evaluation first (an --out directory), wrote an empty report over
    the committed one (counts below 0), or wrote the plot over the report (--out x.png)."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "held_out.jsonl").write_text(json.dumps({"path": "a.py", "text": "x = 1\n"}) + "\n")
    monkeypatch.setattr(Engine, "load", lambda *a, **k: pytest.fail("the model loaded"))
    for args, says in ((["--single", -1, "--multi", 5], "counts of tasks"),
                       (["--single", 0, "--multi", 0], "not both 0"), (["--span", 0], "--span 0 is out of range"), (["--out", tmp_path / "e.png"], "JSON report"),
                       (["--out", tmp_path], "JSON report"), (["--data", tmp_path / "none"], "no held_out.jsonl"),
                       (["--out", data / "held_out.jsonl" / "eval.json"], "is a file, not a folder")):
        with pytest.raises(SystemExit):
            run("eval", "--data", data, "--model", tiny_dir, *args)
        assert says in capsys.readouterr().err


def test_a_split_line_that_is_not_a_corpus_file_is_named(tmp_path):
    split = tmp_path / "train.jsonl"
    split.write_text(json.dumps({"path": "a.py", "text": "x = 1\n"}) + "\n\n" + json.dumps({"path": "b.py"}) + "\n")
    with pytest.raises(ValueError, match=r"train.jsonl:3: expected an object with \"path\" and \"text\""):
        read_split(split)
    split.write_text(json.dumps({"path": "a.py", "text": "x = 1\n"}) + "\n\n{oops\n")
    with pytest.raises(ValueError, match=r"train.jsonl:3: not JSON"):
        read_split(split)
    split.write_text(json.dumps({"path": "a.py", "text": "x = 1\n"}) + "\n\n")
    assert [f.path for f in read_split(split)] == ["a.py"]                # a blank line is skipped


def test_train_refuses_an_empty_split_and_a_negative_length_head(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPANFILL_TRACEBACK", raising=False)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("")
    assert run("train", "--data", tmp_path / "data", "--out", tmp_path / "run") == 1
    assert "holds no files to train on" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run("train", "--data", tmp_path / "data", "--out", tmp_path / "run", "--length-classes", -1)
    assert "argument --length-classes: -1 is less than 0" in capsys.readouterr().err


def test_ctrl_c_ends_a_command_with_one_line_and_code_130(monkeypatch, capsys):
    from spanfill.engine.training import averaging

    def interrupted(argv):
        raise KeyboardInterrupt
    monkeypatch.setattr(averaging, "main", interrupted)
    assert run("average", "a", "b", "--out", "c") == 130
    assert capsys.readouterr().err.strip() == "spanfill average: interrupted"
