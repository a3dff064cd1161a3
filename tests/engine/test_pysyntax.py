"""The Python gate (decoding/pysyntax.py): text that cannot be Python where it stands is cut to its
leading lines that can, or dropped; anything Python takes, or that the text alone cannot judge, stays."""
from pathlib import Path

import pytest

from spanfill.engine.decoding.postprocess import Cursor, finish
from spanfill.engine.decoding.pysyntax import keep_python, not_python, scan


def at(marked: str) -> Cursor:
    before, after = marked.split("|")
    return Cursor(before, after)


BODY = "class Shop:\n    def cheapest(self, items):\n        |\n\n    def other(self):\n        pass\n"


@pytest.mark.parametrize("text", [
    "if = =[.[][]]]]\n        return list[[[[[0]",     # what an undertrained model writes
    "return self..join(items)",
    "return len(items,, amount)",
    "return self.[name]",
    "x = foo(a))",                                    # a closer with nothing to close
    "total = a +",                                    # a statement ending on an operator
    "if = len(items.getlen(keys)",                    # an error before a bracket left open
])
def test_text_python_rejects_is_not_python(text):
    assert not_python(text, at(BODY))


@pytest.mark.parametrize("text", [
    "return min(items, key=lambda i: i.price)",
    "if not items:\n            return None",
    "for item in items:",                             # a block header: finished by the lines to come
    "return sorted(items,",                           # an open bracket: continued below
    "return total(a +",                               # ... mid-expression
    "def helper(a, b",                                # ... in a header
    "yield from items",
    "await self.refresh()",
    "break",
    "else:\n            return None",
    "except KeyError:",
    "from os.path import *",
    "x = '''a docstring\n        that goes on",
    "# a comment ( with an open bracket",
])
def test_python_is_kept(text):
    assert not not_python(text, at(BODY))
    assert keep_python(text, at(BODY)) == text


def test_a_cursor_the_text_cannot_judge_keeps_everything():
    inside_call = at("values = compute(\n    first,\n    |\n)\n")       # the statement began above
    inside_string = at('msg = "if = |"\n')
    inside_docstring = at('def f():\n    """Usage:\n    |\n    """\n')
    for cur in (inside_call, inside_string, inside_docstring):
        assert not not_python("if = = ]", cur) and keep_python("if = = ]", cur) == "if = = ]"


def test_single_line_text_is_judged_with_the_rest_of_its_line():
    assert not not_python("a, b", at("    return max(|)\n"))
    assert not_python("a,, b", at("    return max(|)\n"))
    assert not_python("a)", at("    return max(|)\n"))     # the rest of the line then closes nothing


def test_garbage_after_good_lines_is_cut_and_garbage_first_is_dropped():
    cur = at(BODY)
    assert keep_python("if not items:\n            return None\n        x = = 1", cur) == \
        "if not items:\n            return None"
    assert keep_python("x = = 1\n        return None", cur) is None


def test_finish_gates_python_documents_only():
    cur = at(BODY)
    assert finish("return self..join(items)", cur, python=True) is None
    assert finish("return self..join(items)", cur) == "return self..join(items)"
    assert finish("return min(items)\n        x = = 1", cur, python=True) == "return min(items)"


def test_the_scanner_follows_strings_comments_and_brackets():
    s = scan("f(a, '(', \"\"\"[\n\"\"\", # )\n[b")
    assert s.brackets == ["(", "["] and s.quote is None and not s.comment and not s.unmatched
    assert scan("x = '''open").quote == "'''" and scan("x = 1  # note").comment
    assert scan("a)").unmatched and scan("(]").unmatched


def test_every_line_of_real_python_files_passes():
    """Each line of two real Python files (this test and the gate itself), as a middle completed at
    its indentation and shown by `finish`, passes the gate: what Python takes is never dropped."""
    source = Path(__file__).read_text() + "\n" + Path(scan.__code__.co_filename).read_text()
    lines = source.split("\n")
    checked = 0
    for i in range(1, len(lines) - 1):
        before, middle, after = "\n".join(lines[:i]) + "\n", lines[i], "\n" + "\n".join(lines[i + 1:])
        indent = middle[:len(middle) - len(middle.lstrip())]
        cur = Cursor(before + indent, after)
        shown = finish(middle.lstrip(), cur)
        if shown:
            assert not not_python(shown, cur), (i, middle)
            checked += 1
    assert checked > 100
