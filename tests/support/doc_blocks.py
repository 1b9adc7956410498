"""The code of the documentation's pages, as the docs tests run it: ```` ```python ```` blocks
(a Python program each, complete with its imports), ```` ```ipython ```` blocks (the cells of a
notebook, one page one notebook), and the ``mpinb.`` names the prose mentions. Blocks of other
languages (``text``, ``bash``, ...) are not run. See docs/contributing.md, "The docs' code"."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
GENERATED = ("_build", "_generated", "api/generated")
BLOCK = re.compile(r"^```(python|ipython)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
#: a dotted name of the package in inline code: `mpinb.mpi.allreduce`, `mpinb.MPICluster.start()`
DOTTED = re.compile(r"`(mpinb(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`")


def pages() -> list[Path]:
    """The Markdown pages of docs/ and the README (what the build generates left out)."""
    found = [p for p in DOCS.rglob("*.md") if not any(p.relative_to(DOCS).as_posix().startswith(g) for g in GENERATED)]
    return sorted([ROOT / "README.md", *found])


def blocks(page: Path, language: str) -> list[str]:
    """The page's code blocks of ``language``, in order."""
    return [code for lang, code in BLOCK.findall(page.read_text()) if lang == language]


def dotted_names(page: Path) -> set[str]:
    """The ``mpinb.`` names the page's inline code mentions (outside code blocks)."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return set(DOTTED.findall(text))


def resolve(name: str) -> object:
    """The object a dotted name names: the longest importable module, then attributes. An
    AttributeError or ImportError when it names nothing."""
    import importlib
    import importlib.util

    if name.endswith(".__main__"):  # importing it would run the command line: its file is enough
        if importlib.util.find_spec(name) is None:
            raise ImportError(name)
        return name
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(name)
