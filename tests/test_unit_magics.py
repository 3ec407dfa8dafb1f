"""IPython's own syntax, recognised where IPython recognises it (grader/magics.py).

The rules are IPython's, read in ``IPython/core/inputtransformer2.py`` (ipython/ipython,
IPython 9): ``TransformerManager.transform_cell`` runs ``leading_empty_lines`` and
``leading_indent``, then ``cell_magic`` (a first line ``%%name``, not ``%%name?``), then the
token transformers ``MagicAssign`` (``a = %foo``), ``SystemAssign`` (``a = !foo``),
``EscapedCommand`` (a logical line whose first token is one of ``ESCAPE_SINGLES``: ``! ? % , ;
/``, and the doubles ``!!``, ``??``) and ``HelpEnd`` (a logical line whose last token is ``?``;
``_help_end_re`` takes the name before it). The test holds our reading to IPython's, cell by
cell: the lines IPython rewrites are exactly the lines we make plain Python, and what we
write parses. Where IPython is not installed (no notebook extra) the comparison is skipped.
"""
from __future__ import annotations

import ast

import pytest

from grader.magics import without_magics

#: cells as students write them: help, shell, magics, auto-calls, and Python that only looks like them
CELLS = [
    "jax.jit?", "??jnp.where", "jnp.where??", "x = foo??", "obj.attr[0]?", "?", "%timeit?",
    "files = !ls", "t = %timeit -o f(x)", "d['k'] = %time f(x)", "x: int = %time f(x)", "z = %env HOME",
    "!ls -l", "!!ls", "%matplotlib inline", "/print 1 2", ",print a b", ";print a b",
    "for i in range(2):\n    %time f(i)\n    jax.jit?\n    y = i",
    "import jax\njax.jit?\n\n@jax.jit\ndef f(x):\n    return x",
    # Python that is not IPython's syntax: left as it is
    "display(x)", "print(x)  # really?", "s = 'what?'", "a != b", "x = (1,\n%2)", "x += 1", "x <= y",
    "y = x if a else b  # why?", "obj.method()?", "k = f(a=1)", "def f(x):\n    return x % 2",
]
#: cells IPython turns into fewer lines (a cell magic, a continued line): checked line by line below
CELL_MAGICS = {
    "%%time\ny = 1\n%time y": ["pass  # %%time", "y = 1", "pass  # %time y"],  # %%time runs its body
    "\n\n%%timeit\nf(x)": ["", "", "pass  # %%timeit", "# f(x)"],  # blank lines first: still a cell magic
    "%%bash\nrm -rf /": ["pass  # %%bash", "# rm -rf /"],
    "%%timeit?\ny = 2": ["pass  # %%timeit?", "y = 2"],  # help on the magic; the rest is Python
    "%time f(x) \\\n  + 1\nz = 3": ["pass  # %time f(x)", "  # + 1", "z = 3"],  # one logical line
    "  y = 1\n  z = 2": ["y = 1", "z = 2"],  # a cell indented as a whole is dedented
}


def _changed(before: list[str], after: list[str]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(before, after)) if a.strip() != b.strip()]


@pytest.mark.parametrize("cell", CELLS)
def test_a_line_is_made_python_exactly_where_ipython_rewrites_it(cell):
    transformer = pytest.importorskip(
        "IPython.core.inputtransformer2", reason="IPython is not installed (the notebook extra: pip install -e "
        "'.[notebook]'): nothing to compare with").TransformerManager()
    ours = without_magics(cell).split("\n")
    theirs = transformer.transform_cell(cell).rstrip("\n").split("\n")
    lines = cell.split("\n")
    assert len(ours) == len(lines) == len(theirs)
    assert _changed(lines, ours) == _changed(lines, theirs), (ours, theirs)
    try:
        ast.parse("\n".join(theirs))
    except SyntaxError:  # not Python for IPython either (obj.method()?): nothing to promise
        return
    ast.parse("\n".join(ours))


@pytest.mark.parametrize("cell, expected", CELL_MAGICS.items())
def test_cell_magics_and_continued_lines_keep_their_lines(cell, expected):
    assert without_magics(cell).split("\n") == expected
    ast.parse("\n".join(expected))


def test_assignments_from_magics_keep_their_target():
    assert without_magics("t = %timeit -o f(x)") == "t = None  # %timeit -o f(x)"
    assert without_magics("files = !ls") == "files = None  # !ls"
    assert without_magics("d['k'] = %time f(x)") == "d['k'] = f(x)"  # %time returns its expression's value
    assert without_magics("x = foo?") == "pass  # x = foo?"  # help: IPython drops the assignment too
