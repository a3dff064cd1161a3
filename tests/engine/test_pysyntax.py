"""The Python gate (decoding/pysyntax.py): text that cannot be Python where it stands is cut to its
leading lines that can, or dropped; anything Python takes, or that the text alone cannot judge, stays."""
from pathlib import Path

import pytest

from spanfill.engine.decoding.postprocess import Cursor, finish
from spanfill.engine.decoding.pysyntax import StartStates, cut_unreachable, keep_python, not_python, scan


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
    "except(KeyError, ValueError):",                  # a keyword with its bracket at once
    "elif(len(items) > 1):",
    "except* KeyError:",                              # an exception group's handler
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


def test_lines_after_a_return_at_its_indentation_are_cut():
    cur = at(BODY)
    assert finish("return self.price(items)\n        return self.price(items)", cur, python=True) == \
        "return self.price(items)"
    assert cut_unreachable("for item in items:\n            if item:\n                continue\n"
                           "            total += 1\n        raise ValueError(total)\n        x = 1", cur) == \
        "for item in items:\n            if item:\n                continue\n            total += 1\n        raise ValueError(total)"
    kept = ["if not items:\n            return None\n        return min(items)",       # a dedent runs again
            "return (\n            a,\n        )",                                      # inside brackets
            'doc = """\n        return 1\n        return 2\n        """',              # inside a string
            "return x\n        # a note"]                                              # a comment is no statement
    for text in kept:
        assert cut_unreachable(text, cur) == text, text
    inside_call = at("values = compute(\n    first,\n    |\n)\n")                    # not judged
    assert cut_unreachable("return 1\n    return 2", inside_call) == "return 1\n    return 2"


def test_real_code_is_never_cut_as_unreachable():
    """Every run of three lines of two real Python files, completed at the first one's indentation, is
    kept whole."""
    source = Path(__file__).read_text() + "\n" + Path(scan.__code__.co_filename).read_text()
    lines = source.split("\n")
    checked = 0
    for i in range(1, len(lines) - 3):
        middle = "\n".join(lines[i:i + 3])
        indent = middle[:len(middle) - len(middle.lstrip(" "))]
        cur = Cursor("\n".join(lines[:i]) + "\n" + indent, "\n" + "\n".join(lines[i + 3:]))
        assert cut_unreachable(middle[len(indent):], cur) == middle[len(indent):], (i, middle)
        checked += "return" in middle
    assert checked > 20


def test_the_scanner_follows_strings_comments_and_brackets():
    s = scan("f(a, '(', \"\"\"[\n\"\"\", # )\n[b")
    assert s.brackets == ["(", "["] and s.quote is None and not s.comment and not s.unmatched
    assert scan("x = '''open").quote == "'''" and scan("x = 1  # note").comment
    assert scan("a)").unmatched and scan("(]").unmatched


DOCSTRING = '"""A module whose docstring is longer than a prefix window.\n\n' + "Usage: call it.\n" * 3


def window_at(marked: str, lines: int) -> tuple[str, Cursor]:
    """The document `marked` (cursor at "|"), and its cursor as the server sees it: the prefix window of
    the last `lines` lines before the cursor's, with the document above it in `Cursor.above`."""
    before, after = marked.split("|")
    rows = before.split("\n")
    above, window = "\n".join(rows[:-lines - 1]) + "\n", "\n".join(rows[-lines - 1:])
    return window, Cursor(window, after, above)


def test_a_window_that_starts_inside_a_docstring_is_judged_from_the_text_above_it():
    """A prefix window cut inside a docstring reads its closing quotes as opening ones: alone, it puts
    code in a string (not judged) and the docstring's prose in code. `Cursor.above` gives the gate the
    strings and brackets open where the window starts."""
    in_code = DOCSTRING + '"""\n\n\ndef cheapest(items):\n    |\n'
    window, cur = window_at(in_code, 5)
    assert window.startswith("Usage") and not not_python("if = item.split(item)", Cursor(window, cur.after))
    assert not_python("if = item.split(item)", cur) and keep_python("if = item.split(item)", cur) is None
    assert finish("if = item.split(item)\n    is not None:", cur, python=True) is None
    assert finish("return min(items)", cur, python=True) == "return min(items)"
    _, cur = window_at(DOCSTRING + '"""\n\n\ndef cheapest(items):\n|    return None\n', 5)   # column 0
    assert finish("if = item.split(item)\n", cur, python=True) is None
    assert finish("    items.sort()\n", cur, python=True) == "    items.sort()\n"
    assert finish("items.sort()\n", cur, python=True) is None      # the body below it would be an unexpected indent

    in_prose = DOCSTRING + "Returns: |\n" + '"""\n'          # prose inside the docstring is not code
    _, cur = window_at(in_prose, 2)
    assert finish("the cheapest item, or None if there is none.", cur, python=True) == \
        "the cheapest item, or None if there is none."


def test_a_window_that_starts_inside_brackets_is_judged_from_the_text_above_it():
    in_list = "NAMES = [\n" + '    "a",\n' * 4 + "    |\n]\n"       # an element line, not a statement
    _, cur = window_at(in_list, 2)
    assert keep_python('"b", "c" if', cur) == '"b", "c" if'
    after_list = "NAMES = [\n" + '    "a",\n' * 4 + "]\nfor name in NAMES:\n    |\n"
    _, cur = window_at(after_list, 3)
    assert not_python("print(name))", cur) and not not_python("print(name)", cur)


def test_brackets_left_open_by_a_line_being_written_do_not_hold_the_lines_below():
    """`item = find(` typed in one function leaves a bracket open to the end of the file; a line that only
    a statement can start (`def`, `return`, ...) shows it was left unfinished, and the gate judges the
    next function's body again: in the window, and in the document above it."""
    source = "def restock(items, name):\n    item = find(\n\n\ndef cheapest(items):\n    |\n"
    assert not_python("if = item.split(item)", at(source))
    _, cur = window_at(source, 1)
    assert "find(" in cur.above and not_python("if = item.split(item)", cur)
    assert not_python("x.(", at("x = find(\n    return |\n"))    # the cursor's own line starts a statement
    assert scan("x = find(\ndef f():\n").brackets == ["("]                 # only where asked
    assert scan("x = find(\ndef f():\n", recover=True).brackets == []
    assert scan('x = f("""\ndef f():\n', recover=True).quote == '"""'     # not inside a string
    assert scan("x = f(\n    returned,\n", recover=True).brackets == ["("]  # a name, not the keyword


def test_start_states_scan_each_text_above_once_and_go_on_from_a_text_it_extends(monkeypatch):
    import spanfill.engine.decoding.pysyntax as pysyntax
    states, scanned = StartStates(size=2), []

    def counting(text, state=None, recover=False):
        scanned.append(text)
        return scan(text, state, recover)
    monkeypatch.setattr(pysyntax, "scan", counting)
    top = '"""Doc\n\nmore\n'
    assert states(top).quote == '"""' and states(top).quote == '"""'
    assert scanned == [top]                                   # the second ask was remembered
    longer = top + '"""\nx = (\n'
    assert states(longer) == scan(longer) and scanned[-1] == '"""\nx = (\n'   # went on from `top`
    states("a\n"), states("b\n")                               # two more: `top` and `longer` forgotten
    scanned.clear()
    assert states(longer).brackets == ["("] and scanned == [longer]
    states(longer).brackets.append("[")                       # a caller's copy: what is kept is unchanged
    assert states(longer).brackets == ["("]


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


@pytest.mark.parametrize("line", ["x = " + "-" * 6000, "x = " + "~" * 20000, "x = " + "(" * 6000])
def test_a_line_nested_past_the_parser_s_stack_is_judged_not_raised(line):
    """compile() raises MemoryError or RecursionError on nesting deeper than its stack: the gate calls
    such text not Python (it used to raise, and the server took the error for a broken engine)."""
    assert finish("1", Cursor(line, "\n"), python=True) is None


def test_a_line_continued_by_a_backslash_is_not_judged_on_its_own():
    """A cursor line after a line that ends in a backslash continues that line's statement: it is not
    compiled as a statement of its own (`:` after `if a and \\` + `b` was dropped); a backslash in a
    comment continues nothing."""
    cur = Cursor("def f(a, b):\n    if a and \\\n            b", "\n")
    assert not not_python(":", cur) and finish(":\n        pass", cur, python=True) == ":"
    with_ = Cursor("with open(a) as f, \\\n        open(", "\n")
    assert not not_python("b) as g:", with_)
    commented = Cursor("x = 1  # a note \\\n", "\n")
    assert not_python("= = 2", commented)
