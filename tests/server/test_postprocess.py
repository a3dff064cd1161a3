"""Post-processing rules, one test group per rule, on realistic cursor positions."""
from spanfill.engine.decoding.postprocess import (Cursor, apply_line_policy, at_line_start, drop_closed_brackets,
                                         finish, keep_block_indentation, leaves_block, repeats_following_lines,
                                         trim_suffix_overlap, wants_multiline)


def at(source: str) -> Cursor:
    """A cursor where `source` has a `|`."""
    before, after = source.split("|")
    return Cursor(before, after)


# -- line policy ---------------------------------------------------------------------------
def test_mid_line_with_text_after_is_single_line():
    cur = at("def area(r):\n    return math.pi * |r ** 2\n")
    assert not wants_multiline(cur)
    assert apply_line_policy("2 * \n    x = 1", cur) == "2 * "


def test_empty_line_and_block_opener_are_multi_line():
    assert wants_multiline(at("def area(r):\n    |\n"))
    assert wants_multiline(at("def area(r):|\n\ndef other():\n"))
    assert wants_multiline(at("config = {|\n"))
    assert not wants_multiline(at("x = compute(a, b)|\n"))      # end of a plain statement


def test_end_of_plain_line_keeps_only_the_rest_of_it():
    assert finish(" + offset\n    y = 2", at("    total = base|\n    return total\n")) == " + offset"
    assert finish("\n    y = 2", at("    total = base|\n")) is None


def test_column_zero_before_text_inserts_whole_lines_above_it():
    source = "def area(r):\n    pi = 3.14159\n|    return pi * r ** 2\n"
    cur = at(source)
    assert at_line_start(cur) and not wants_multiline(cur)
    # the model's middle ends with a line break and the next line's indentation: the line is shown with
    # its break, so the document reads prefix + completion + suffix
    shown = finish("    r2 = r * r\n    ", cur, python=True)
    assert shown == "    r2 = r * r\n"
    assert source.replace("|", shown).splitlines()[2:] == ["    r2 = r * r", "    return pi * r ** 2"]
    # several whole lines stay whole; text that leaves the block ends the completion
    assert finish("    r2 = r * r\n    r3 = r2 * r\nx = 1\n", cur) == "    r2 = r * r\n    r3 = r2 * r\n"


def test_column_zero_rules_of_a_blank_line_apply():
    cur = at("def area(r):\n    pi = 3.14159\n|    return pi * r ** 2\n")
    assert finish("    return pi * r ** 2\n", cur) is None                  # a copy of the line below
    assert finish("    r2 = = r\n", cur, python=True) is None               # not Python where it stands
    assert finish("    r2 = r * r\r\n    ", cur) == "    r2 = r * r\n"     # CRLF: the caller restores it


def test_column_zero_without_a_line_break_prefixes_the_line():
    cur = at("def f(items):\n|print(items)\n")
    assert at_line_start(cur)
    assert finish("return ", cur) == "return "
    assert not at_line_start(at("def f(items):\n|\n"))                   # a blank line: multi-line as before
    assert not at_line_start(at("def f(items):\n    print|(items)\n"))   # inside the code: single-line


def test_after_the_indentation_a_line_break_inserts_whole_lines_above_with_the_indentation_after_them():
    """Just after a line's indentation (where Home and Vim's `I` put the cursor), a candidate that breaks
    the line is whole lines above it, ended with the line break and the indentation that put the line's
    code back where it was (the break was dropped: `b = a * 2return a`)."""
    source = "def f(a):\n    |return a\n"
    cur = at(source)
    assert at_line_start(cur) and not wants_multiline(cur)
    for raw in ("b = a * 2\n    ", "b = a * 2\n"):                  # diffusion's middle; the AR fallback's first line
        shown = finish(raw, cur, python=True)
        assert shown == "b = a * 2\n    "
        assert source.replace("|", shown) == "def f(a):\n    b = a * 2\n    return a\n"
    assert finish("const b = a * 2;\n  ", at("function f(a) {\n  |return a;\n}\n")) == "const b = a * 2;\n  "
    assert finish("b = a * 2\n    c = b\n    ", cur) == "b = a * 2\n    c = b\n    "
    assert finish("return a\n", cur) is None                           # a copy of the line it moves down
    assert finish("b = ", at("def f(a):\n    |a.sort()\n"), python=True) == "b = "   # no line break: it prefixes the line


def test_lines_above_a_line_are_python_only_if_that_line_still_follows_them():
    """In Python, whole lines inserted above a line keep only the leading lines after which that line
    still parses: a block header above a line no deeper than it is an IndentationError."""
    cur = at("x = 1\n|print(x)\n")
    assert finish("if x:\n", cur, python=True) is None
    assert finish("y = 2\nfor i in range(3):\n", cur, python=True) == "y = 2\n"
    assert finish("if x:\n", cur, python=False) == "if x:\n"           # other languages: not judged
    assert finish("if x:\n    y = 2\n", at("x = 1\n|    print(x)\n"), python=True) == "if x:\n    y = 2\n"   # the line joins the block
    body = at("def f(values):\n    for v in values:\n        use(v)\n|    return values\n")
    assert finish("        use(v + 1)\n", body, python=True) == "        use(v + 1)\n"   # deeper above a dedent: fine
    assert finish("    values.sort()\n", at("def f(values):\n|        return values\n"), python=True) is None   # unexpected indent
    assert finish("total = sum(\n", at("x = 1\n|    values)\n"), python=True) == "total = sum(\n"   # a bracket it continues


def test_lines_above_a_line_follow_the_indentation_levels_open_above():
    """The levels open above the cursor decide: an inserted line that dedents to no open level, or an
    `else`/`except` below lines no deeper than itself, is not Python; a comment below is not judged."""
    nested = at("def f(b):\n    for a in b:\n        if a:\n            a()\n|    return 1\n")
    assert finish("      c()\n", nested, python=True) is None                         # 6: no open level
    assert finish("        b.sort()\n", nested, python=True) == "        b.sort()\n"   # the loop's level
    assert finish("def g():\n        x()\n", nested, python=True) == "def g():\n"      # its body would not dedent to 4
    assert finish("w = 3\n", at("if a:\n    x = 1\n|else:\n    y = 2\n"), python=True) is None
    assert finish("    w = 3\n", at("if a:\n    x = 1\n|else:\n    y = 2\n"), python=True) == "    w = 3\n"
    assert finish("y = 2\n", at("try:\n    y = 1\n|except E:\n    pass\n"), python=True) is None
    assert finish("    if y:  # don't\n", at("def f():\n|    return 1\n"), python=True) is None   # a header, its comment aside
    assert finish("    y = 2\n", at("def f():\n|        # deep comment\n    return x\n"), python=True) == "    y = 2\n"
    assert finish("    @property\n", at("class A:\n    def f(self):\n        pass\n|    def g(self):\n        pass\n"),
                  python=True) == "    @property\n"
    # a header whose brackets close on a later line opens its block there (held-out code: every such body was refused)
    signature = at("class A:\n    def __init__(\n        self,\n        name,\n    ):\n|        self.name = name\n")
    assert finish("        self._name = name\n", signature, python=True) == "        self._name = name\n"
    # a prefix window that starts inside that header's brackets: no statement's width is known (it raised)
    assert finish("    # note\n", Cursor("    a,\n):\n", "    return 1\n", "def f(\n"), python=True) == "    # note\n"


# -- suffix overlap ------------------------------------------------------------------------
def test_suffix_overlap_is_dropped_from_a_call():
    cur = at('    print(|)\n')
    assert trim_suffix_overlap('f"total: {total}")', cur) == 'f"total: {total}"'


def test_suffix_overlap_of_several_characters():
    cur = at("    if key in |):\n")
    assert trim_suffix_overlap("self.cache):", cur) == "self.cache"


def test_a_balanced_ending_the_suffix_starts_with_is_kept():
    # the editor closed the bracket; the completion closes brackets of its own: the overlap is not a repeat
    assert trim_suffix_overlap("len(items)", at("    total = sum(|)\n")) == "len(items)"
    assert trim_suffix_overlap("a[0]", at("x = [|]\n")) == "a[0]"
    assert finish("len(items)", at("    total = sum(|)\n")) == "len(items)"
    # what repeats the suffix's closers goes, what closes the completion's own bracket stays
    assert trim_suffix_overlap("g(x))", at("print(foo(|))\n")) == "g(x)"
    assert trim_suffix_overlap("len(items))", at("    total = sum(|)\n")) == "len(items)"


def test_a_repeat_of_the_suffix_with_brackets_of_its_own_is_dropped():
    assert trim_suffix_overlap("foo(a), ", at("call(|foo(a), b)\n")) == ""
    assert trim_suffix_overlap("x + len(a)", at("y = |len(a)\n")) == "x + "
    source = "def f(n):\n    |\n    for i in range(n):\n        pass\n"
    assert finish("total = 0\n    for i in range(n):", at(source)) == "total = 0"


def test_suffix_overlap_of_whole_lines():
    source = "def f(x):\n    |\n\n\ndef g():\n    pass\n"
    raw = "return x * 2\n\n\ndef g():"
    assert finish(raw, at(source)) == "return x * 2"


def test_completion_already_typed_yields_nothing():
    assert finish("e", at("    name = valu|e\n")) is None


# -- brackets ------------------------------------------------------------------------------
def test_bracket_closed_by_the_suffix_is_not_closed_again():
    cur = at("    result = max(|)\n")
    # the model closes max( and goes on; the suffix already closes it
    assert drop_closed_brackets("a, b) + 1", cur) == "a, b"


def test_bracket_on_the_next_line_counts():
    cur = at("    values = [\n        |\n    ]\n")
    assert finish("1, 2, 3]", cur) == "1, 2, 3"


def test_a_closer_below_that_closes_an_outer_bracket_leaves_the_inner_one_to_the_completion():
    # the `)` below closes print( (its line's indentation), not len(: the completion closes len(
    assert finish("x)", at("print(\n    len(|\n)\n")) == "x)"
    assert finish("1),", at("r = dict(\n    a=foo(|\n)\n")) == "1),"
    # the closer below at the indentation of the innermost bracket's line closes that bracket
    assert finish("x)", at("total = max(|\n)\n")) == "x"
    assert finish("1, 2, 3]", at("    values = [\n        |\n    ]\n")) == "1, 2, 3"


def test_brackets_inside_strings_are_ignored():
    cur = at("    print(|)\n")
    assert drop_closed_brackets('"a)", b', cur) == '"a)", b'


def test_brackets_the_completion_opens_itself_are_kept():
    cur = at("    total = sum(|)\n")
    assert finish("len(x) for x in items)", cur) == "len(x) for x in items"


def test_brace_closing_a_function_body_the_suffix_closes():
    cur = at("function add(a, b) {\n    |\n}\n")
    assert finish("return a + b;\n}", cur) == "return a + b;"


# -- indentation ---------------------------------------------------------------------------
def test_extra_indentation_at_an_indented_empty_line_is_removed():
    cur = at("def area(r):\n    |\n")
    assert keep_block_indentation("    return r * r", cur) == "return r * r"


def test_extra_indentation_at_column_zero_comes_off_every_line():
    js = at("function f(a) {\n    const x = 1;\n|\n}\n")
    assert finish("        const y = 2;\n        return x + y;", js) == "    const y = 2;\n    return x + y;"
    py = at("def area(r):\n|\n")
    assert finish("        if r < 0:\n            return 0\n        return r * r", py) == \
        "    if r < 0:\n        return 0\n    return r * r"


def test_only_the_first_line_loses_its_excess_where_the_lines_after_it_are_shallower():
    # the model over-indented its first line alone: the lines after it stand where they are
    assert finish("        y = 2\n    return y", at("def f():\n    x = 1\n|\n")) == "    y = 2\n    return y"


def test_indentation_from_column_zero_is_kept():
    cur = at("def area(r):\n|\n")
    assert finish("    return r * r", cur) == "    return r * r"


def test_lines_that_leave_the_block_are_dropped():
    cur = at("class Stack:\n    def push(self, x):\n        |\n")
    raw = "self.items.append(x)\n        return len(self.items)\n\ndef helper():\n    pass"
    assert finish(raw, cur) == "self.items.append(x)\n        return len(self.items)"


def test_text_leaves_the_block_at_the_first_character_of_a_dedented_line():
    cur = at("class Stack:\n    def push(self, x):\n        |\n")
    raw = "self.items.append(x)\n        return len(self.items)\n\ndef helper():\n    pass"
    cut = raw.index("def helper")
    assert not leaves_block(raw[:cut], cur)          # a blank line and the next line's start are not yet out
    assert not leaves_block("self.items.append(x)", cur)
    assert leaves_block(raw[:cut + 1], cur) and leaves_block(raw, cur)
    # here (no suffix overlap), once leaves_block turns true what follows no longer changes the shown text
    assert finish(raw[:cut + 1], cur) == finish(raw, cur)
    opener = at("    for item in items:|\n")
    assert not leaves_block("\n        total += item\n        count += 1", opener)
    assert not leaves_block("\n        total += item\n    print(total)", opener)   # the loop's own level
    assert leaves_block("\n        total += item\nprint", opener)


def test_body_after_a_block_opener_keeps_its_indentation():
    cur = at("    for item in items:|\n")
    assert finish("\n        total += item\n        count += 1", cur) == "\n        total += item\n        count += 1"


def test_tab_indented_documents_get_tabs():
    cur = at("func main() {\n\tif ok {|\n")
    assert finish("\n        run()\n    }", cur) == "\n\t\trun()\n\t}"


def test_a_block_opened_above_a_blank_line_indents_by_the_documents_own_step():
    two = "def f(x):\n  y = 1\n  if x:\n  |\n  return 0\n"
    assert finish("    return 1", at(two), python=True) == "  return 1"         # 2 typed + 2: not 2 + 4
    four = "def f(x):\n    y = 1\n    if x:\n    |\n    return 0\n"
    assert finish("    return 1", at(four), python=True) == "    return 1"
    deep = "        y = 1\n        if x:\n            z = 2\n        if y:\n        |\n"    # a method's body: depth 8
    assert finish("        return 1", at(deep), python=True) == "    return 1"
    hanging = ("class C:\n    def long_function_name(\n            var_one, var_two):\n        print(var_one)\n\n"
               "    def other(\n            a, b):\n        pass\n\n    def run(self):\n        |\n")   # PEP 8's hanging indent
    assert finish("    x = 1\n        return x", at(hanging), python=True) == "x = 1\n        return x"


def test_the_indent_style_is_the_one_most_lines_around_the_cursor_use():
    # only the suffix window shows the file's tabs; a comment's aligned ` */` above the cursor is not indentation
    assert finish("\n    return 2", at("def f():|\n\tx = 1\n"), python=True) == "\n\treturn 2"
    cur = at("/**\n * Doc.\n */\nvoid f(void) {|\n\tg();\n}\n")
    assert finish("\n    h();", cur) == "\n\th();"
    assert finish("\n\treturn 2", at("def f():|\n    x = 1\n    y = 2\n"), python=True) == "\n    return 2"


# -- rejection -----------------------------------------------------------------------------
def test_whitespace_only_yields_nothing():
    assert finish("   \n  ", at("def f():\n    |\n")) is None
    assert finish("", at("x = |\n")) is None


def test_duplicate_of_the_next_line_yields_nothing():
    cur = at("def f(items):\n    |\n    return sorted(items)\n")
    assert repeats_following_lines("return sorted(items)", cur)
    assert finish("return sorted(items)", cur) is None
    assert finish("items = list(items)", cur) == "items = list(items)"


def test_crlf_text_is_handled_as_lf():
    cur = Cursor("def f(x):\r\n    ", "\r\n")
    assert finish("return x\r\n", cur) == "return x"


def test_a_copy_of_the_lines_below_counts_their_indentation():
    """The text that ends an inner block is no copy of the same text below that ends an outer one."""
    assert finish("return None", at("def f(x):\n    if x < 0:\n        |\n    return None\n"), python=True) == "return None"
    assert finish("}", at("function f(x) {\n  if (x) {\n    y();\n  |\n}\n")) == "}"
    assert finish("return None", at("def f(x):\n    if x < 0:\n        return 1\n    |\n    return None\n")) is None


def test_a_mid_line_completion_keeps_the_space_before_the_text_after_it():
    """The Python gate judged and returned the candidate without its trailing spaces, which the text
    after the cursor needs: `if |x:` + `not x` showed `not` (`if notx:`, which compiles)."""
    assert finish("not x", at("if |x:\n    pass\n"), python=True) == "not "
    assert finish("await foo()", at("async def g():\n    y = |foo()\n"), python=True) == "await "
    assert finish("a + b", at("x = |b\n"), python=True) == "a + "
    assert finish("total ", at("    return |\n"), python=True) == "total"     # nothing after it on the line


def test_a_multi_line_candidate_mostly_cut_is_not_worth_showing_over_ar():
    """At a multi-line cursor of a Python document a candidate whose shown text keeps less than the share
    of it asks for the engine's AR fallback (would_show false), though it would still be shown by
    itself; at a single-line cursor or in another language, anything shown is enough; a share of 0 asks
    only that something is shown."""
    from spanfill.engine.decoding.postprocess import Shown
    cursor = Cursor("def f(x):\n", "\n\ndef g():\n    pass\n")
    whole = "    y = x + 1\n    return y"
    mostly_cut = "    y = x + 1\n    return ] [ 3 4 5 6 7 8 9 10 11 12 13 14 15 16"    # the second line is no Python
    shown = Shown(cursor, python=True, min_share=0.5)
    assert shown.text(whole) == whole and shown.would_show(whole)
    assert shown.text(mostly_cut) == "    y = x + 1" and not shown.would_show(mostly_cut)
    assert Shown(cursor, python=True, min_share=0).would_show(mostly_cut)
    single = Shown(Cursor("total = f(", ")\n"), python=True, min_share=0.5)
    raw = "x) + ] ] ] ] ] ] ] ] ] ] ] ] ]"                       # one line: cut to `x`, a fraction of it
    assert single.text(raw) == "x" and single.would_show(raw)
    # in another language the rules cut text that leaves the block or repeats the suffix, no sign of a bad one
    assert Shown(cursor, python=False, min_share=0.5).would_show(mostly_cut)


def test_by_default_a_multi_line_candidate_the_rules_cut_at_all_is_not_worth_showing_over_ar():
    """MIN_SHOWN_SHARE is 1: at a multi-line cursor of a Python document, one stray character the
    Python gate cuts sends the request to the AR fallback; blank characters do not count."""
    from spanfill.engine.decoding.postprocess import Shown
    cursor = Cursor("def f(x):\n", "\n\ndef g():\n    pass\n")
    whole = "    y = x + 1\n    return y"
    slightly_cut = whole + "\n    ]"
    shown = Shown(cursor, python=True)
    assert shown.text(slightly_cut) == whole and not shown.would_show(slightly_cut)
    assert shown.would_show(whole) and shown.would_show(whole + "\n\n   ")
    assert Shown(cursor, python=True, min_share=0.5).would_show(slightly_cut)
