"""Unit tests of grader/authoring/variants.py: a variant written as the definitions it changes."""
from __future__ import annotations

import textwrap

import pytest

from grader.authoring.variants import PatchError, is_patch, splice

SOLUTION = textwrap.dedent('''\
    """The solution's docstring."""
    import jax
    import jax.numpy as jnp

    SCALE = 2.0


    # the helper
    def _helper(x):
        return x * SCALE


    @jax.jit
    def f(x):
        """f's docstring."""
        return _helper(x) + 1


    @jax.jit
    def g(x):
        return jnp.sum(x)
    ''')


def _ns(source: str) -> dict:
    namespace: dict = {}
    exec(compile(source, "<spliced>", "exec"), namespace)  # noqa: S102 - the test's own text
    return namespace


def test_a_patch_replaces_the_function_it_names_and_keeps_the_rest():
    patch = "# expect-failed: f.values\n# why: off by one\n# base: solution\n\n\n@jax.jit\ndef f(x):\n    return x\n"
    made = splice(SOLUTION, patch)
    assert made.count("def f(") == 1 and "return x\n" in made and "_helper(x) + 1" not in made
    assert "def g(x):" in made and "# the helper" in made and '"""The solution\'s docstring."""' in made
    assert "expect-failed" not in made and "base: solution" not in made  # the header stays in the variant
    assert made.index("def _helper") < made.index("def f(") < made.index("def g(")  # in the solution's order


def test_a_patch_brings_its_imports_and_new_helpers_before_what_uses_them():
    patch = textwrap.dedent('''\
        # expect-failed:
        # base: solution
        import math


        def _norm(x):
            return math.sqrt(float(x @ x))


        # written with the new helper
        @jax.jit
        def g(x):
            return jnp.sum(x) + 0 * _norm(x)
        ''')
    made = splice(SOLUTION, patch)
    assert made.index("import jax.numpy") < made.index("import math") < made.index("SCALE = 2.0")
    assert made.index("def _norm") < made.index("# written with the new helper") < made.index("def g(")
    ns = _ns(made)
    assert {"f", "g", "_norm", "_helper", "SCALE"} <= set(ns)


def test_a_constant_is_replaced_too():
    made = splice(SOLUTION, "# expect-failed: f.values\n# base: solution\nSCALE = 3.0\n")
    assert "SCALE = 3.0" in made and "SCALE = 2.0" not in made
    assert float(_ns(made)["f"](1.0)) == 4.0


@pytest.mark.parametrize("patch, words", [
    ("# base: solution\nprint('hi')\n", "defines no name"),
    ("# base: solution\nimport jax\n", "changes nothing"),
])
def test_a_patch_that_is_not_one_says_why(patch, words):
    with pytest.raises(PatchError, match=words):
        splice(SOLUTION, patch, name="v.py")


def test_only_a_file_headed_base_solution_is_a_patch():
    assert is_patch("# expect-failed: a\n# base: solution\n")
    assert not is_patch("# expect-failed: a\nimport jax\n")
    assert not is_patch("import jax\n# base: solution\n")  # a comment below the header is not the header
