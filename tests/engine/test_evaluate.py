"""Held-out evaluation: tasks are deterministic, and each completion is scored raw and as shown."""
from spanfill.engine.tools import evaluate as ev
from spanfill.engine.api import CompletionResult
from spanfill.engine.training.corpus import CorpusFile

FILES = [CorpusFile(f"pkg/mod{i}.py", "".join(f"def f{j}(x):\n    return x + {j}\n\n" for j in range(12)))
         for i in range(6)]


def test_tasks_are_deterministic_and_cut_from_the_files(tiny_tok):
    a = ev.build_tasks(FILES, 5, 3, tiny_tok, 32)
    b = ev.build_tasks(list(reversed(FILES)), 5, 3, tiny_tok, 32)
    assert a == b and [t.kind for t in a] == ["single"] * 5 + ["multi"] * 3
    texts = {f.path: f.text for f in FILES}
    for t in a:
        assert t.prefix + t.middle + t.suffix == texts[t.task_id.split("/", 1)[1].split("#")[0]]
        assert (t.kind == "multi") == ("\n" in t.middle)


def test_line_tasks_are_whole_lines_above_code_and_leave_the_other_kinds_alone(tiny_tok):
    from spanfill.engine.decoding.postprocess import Cursor, at_line_start
    lines = ev.build_tasks(FILES, 5, 3, tiny_tok, 32, n_line=4)
    assert lines[:8] == ev.build_tasks(FILES, 5, 3, tiny_tok, 32)          # single and multi as without them
    assert lines[8:] and [t.kind for t in lines[8:]] == ["line"] * len(lines[8:])
    assert [t for t in lines if t.kind == "line"] == ev.build_tasks(FILES, 0, 0, tiny_tok, 32, n_line=4)
    texts = {f.path: f.text for f in FILES}
    for t in lines[8:]:
        assert t.prefix + t.middle + t.suffix == texts[t.task_id.split("/", 1)[1].split("#")[0]]
        assert t.middle.endswith("\n") and t.middle.count("\n") == 1 and t.middle.strip()
        assert at_line_start(Cursor(t.prefix, t.suffix))


class Scripted:
    """Answers every request with one fixed raw middle."""
    info = {"model": "scripted"}

    def __init__(self, raw: str):
        self.raw = raw

    def complete(self, req):
        return CompletionResult([self.raw], 0, 0, 0, 1, [True])


def test_shown_scores_use_the_servers_post_processing():
    task = ev.Task("single/x.py#0", "single", "def f(x):\n    return x + ", "1", "\n\nprint(f(2))\n")
    # the raw middle runs on past the line; the editor shows the rest of the cursor's line only
    report = ev.evaluate(Scripted("1\n    print(x)"), [task], 32, modes=[("ar", None, "content")], progress=False)
    (row,) = report["results"]
    assert row["exact_match"] == 0.0 and row["shown_exact_match"] == 1.0
    assert row["edit_similarity"] < 1.0 == row["shown_edit_similarity"]
    assert (row["shown_chars_mean"], row["reference_chars_mean"]) == (1.0, 1.0)
    # nothing shown (only whitespace) scores as an empty completion
    (row,) = ev.evaluate(Scripted("  "), [task], 32, modes=[("ar", None, "content")], progress=False)["results"]
    assert row["shown_exact_match"] == 0.0 and row["shown_edit_similarity"] == 0.0
    assert row["shown_chars_mean"] == 0.0
    # a completion that stops early is shorter than the reference
    long = ev.Task("single/x.py#1", "single", "x = ", "compute(a, b)", "\n")
    (row,) = ev.evaluate(Scripted("compute("), [long], 32, modes=[("ar", None, "content")], progress=False)["results"]
    assert (row["shown_chars_mean"], row["reference_chars_mean"]) == (8.0, 13.0)


def test_rows_name_their_decoding():
    assert ev.decoding_label({"mode": "ar", "steps": None, "rule": "content"}) == "AR"
    assert ev.decoding_label({"mode": "diffusion", "steps": 4, "rule": "content"}) == "diffusion T=4"
    assert ev.decoding_label({"mode": "diffusion", "steps": 2, "rule": "fixed"}) == "diffusion T=2, fixed rule"
    assert ev.decoding_label({"mode": "diffusion", "steps": 4}) == "diffusion T=4"   # older result files
    assert ev.decoding_label({"mode": "diffusion", "steps": 4, "check": "auto", "fallback": True}) == \
        "diffusion T=4, AR check, AR fallback"
    assert ev.decoding_label({"mode": "diffusion", "steps": None, "check": 0.1}) == "diffusion, default T, AR check 0.1"
