"""The one table of environment variables (mpinb/environment.py) against the code: every
``MPINB_*`` name the code, the build, CI and the tests use is in it, none of its entries is
stale, and the package reads each name from the table, never from a literal of its own."""

from __future__ import annotations

import ast
import pathlib
import re

from mpinb import environment

ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = re.compile(r"\bMPINB_[A-Z][A-Z_]*[A-Z]\b")
#: C preprocessor macros of the compiled libraries (set by setup.py with -D), not variables
MACROS = {"MPINB_MPI_FAMILY", "MPINB_MPI_FAMILY_H", "MPINB_BUILD_MPICC", "MPINB_BUILD_JAXLIB"}
TABLE = {v.name for v in environment.VARIABLES + environment.TEST_VARIABLES}


def sources() -> list[pathlib.Path]:
    """The code, the build, CI, the tests and the tutorials' twins (not the table itself)."""
    found = [*ROOT.joinpath("mpinb").rglob("*.py"), *ROOT.joinpath("ext").glob("*.p*"),
             *ROOT.joinpath("ext").glob("*.c"), ROOT / "setup.py", *ROOT.joinpath(".ci").iterdir(),
             *ROOT.joinpath("tests").rglob("*.py"), *ROOT.joinpath("notebooks").glob("*.py")]
    return [p for p in found if p.is_file() and p.name != "environment.py" and p.name != "test_environment.py"]


def used() -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for path in sources():
        for name in NAME.findall(path.read_text(errors="replace")):
            names.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return names


def test_every_variable_used_is_in_the_table():
    unknown = {name: sorted(where) for name, where in used().items() if name not in TABLE | MACROS}
    assert unknown == {}, "add them to mpinb/environment.py (VARIABLES, or TEST_VARIABLES)"


def test_every_variable_of_the_table_is_used():
    stale = TABLE - set(used())
    assert stale == set(), "read nowhere: remove them from mpinb/environment.py"


def test_the_package_reads_each_name_from_the_table():
    """A string literal that is a variable's name, outside docstrings and messages, in mpinb/."""
    literal = []
    for path in ROOT.joinpath("mpinb").rglob("*.py"):
        if path.name == "environment.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in TABLE:
                literal.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert literal == [], "use mpinb.environment's entry instead"


def test_each_entry_says_who_reads_it_and_what_it_does():
    for variable in environment.VARIABLES + environment.TEST_VARIABLES:
        assert variable.name.startswith("MPINB_") and variable.read_by and variable.values and variable.default
        assert variable.meaning.endswith(".") and len(variable.meaning.split()) <= 30, variable
    assert len(TABLE) == len(environment.VARIABLES) + len(environment.TEST_VARIABLES)  # no name twice
