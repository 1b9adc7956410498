"""Sphinx configuration of mpinb's documentation site (MyST Markdown, notebooks by myst-nb).

Build: ``sphinx-build -W docs docs/_build/html`` (CI does, warnings failing the build).

The tutorials are shown with the outputs of a real run: the notebook tests
(tests/test_notebooks.py) save each executed notebook to tests/artifacts/notebooks/, and this
file copies them into docs/tutorials/ before Sphinx reads its sources. Nothing is executed here.
A tutorial without a saved run is a warning (a failure under -W), and the page then shows the
notebook as shipped, without outputs: run ``python -m pytest tests/test_notebooks.py`` first.
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

from docutils.nodes import make_id

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))

project = "mpinb"
author = "the mpinb developers"
copyright = "the mpinb developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "benchmark_figures",
    "architecture",
    "plain_docstrings",
]

# ------------------------------------------------------------------------------ the sources
exclude_patterns = ["_build", "_generated", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
nb_execution_mode = "off"  # the tutorials come executed from the notebook tests
nb_output_stderr = "show"
# a finished mpinb view is static HTML; a widget view (a live box) would be dead on a static page
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None),
                              ("html", "application/vnd.jupyter.widget-state+json", None)]

# ------------------------------------------------------------------------------ the API pages
# the public API on reference/api.md (autodoc, with type hints in the signatures), and for
# developers one page per room of the package (a subpackage, or the modules at its top), each
# module on it documented from its docstrings: written below before Sphinx reads its sources
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"

# ------------------------------------------------------------------------------ the output
html_theme = "furo"
html_title = "mpinb"
html_static_path = ["_static"]  # the view's screenshots (reference/reading-the-view.md)

TUTORIALS = ("01_quickstart", "02_debugging_transpose", "03_pencil_fft", "04_jax_native",
             "05_distributed_cg", "06_hangs")
EXECUTED = ROOT / "tests" / "artifacts" / "notebooks"
SHIPPED = ROOT / "mpinb" / "tutorials"
UNEXECUTED: list = []


#: a finding's link to a tutorial's section, as the view writes it beside the notebook
NOTEBOOK_LINK = re.compile(r"""href=(['"])(\d\d_\w+)\.ipynb#([^'"]*)\1""")


def site_links(text: str) -> str:
    """A view's links to a tutorial's section (``02_debugging_transpose.ipynb#What-XLA-compiled``,
    JupyterLab's anchor beside the notebook) made the same section's on this site (its page, and
    the id Sphinx gives the heading)."""
    return NOTEBOOK_LINK.sub(lambda m: f"href={m[1]}{m[2]}.html#{make_id(m[3])}{m[1]}", text)


def copy_tutorials() -> None:
    """Each tutorial's saved run (else the shipped notebook) into docs/tutorials/, without the
    kernel's widget state (the finished views are static HTML; the state would make the page load
    the widget manager from the network), its views' links to tutorials leading to their pages."""
    for name in TUTORIALS:
        source = EXECUTED / f"{name}.ipynb"
        if not source.is_file():
            UNEXECUTED.append(name)
            source = SHIPPED / f"{name}.ipynb"
        nb = json.loads(source.read_text())
        nb.get("metadata", {}).pop("widgets", None)
        for cell in nb["cells"]:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "text/html" in data:
                    html = data["text/html"]
                    data["text/html"] = site_links(html if isinstance(html, str) else "".join(html))
        target = HERE / "tutorials" / f"{name}.ipynb"
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)


copy_tutorials()


def api_pages() -> dict:
    """Room -> its modules: each subpackage of mpinb, and "mpinb" for the package and the modules
    at its top (``python -m mpinb``'s ``__main__`` left out: importing it runs the command)."""
    package = ROOT / "mpinb"
    rooms: dict = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts.pop()
        room = parts[1] if len(parts) > 1 and (package / parts[1]).is_dir() else "mpinb"
        rooms.setdefault(room, []).append(".".join(parts))
    return rooms


def write_api_pages() -> None:
    """docs/api/generated/ROOM.md for every room: each of its modules by autodoc (the developer
    API, docs/developer-api.md)."""
    out = HERE / "api" / "generated"
    out.mkdir(parents=True, exist_ok=True)
    rooms = api_pages()
    for stale in set(out.glob("*.md")) - {out / f"{room}.md" for room in rooms}:
        stale.unlink()
    for room, names in rooms.items():
        title = "mpinb: the package and its top-level modules" if room == "mpinb" else f"mpinb.{room}"
        lines = [f"# {title}", ""]
        for name in names:
            lines += [f"## {name}", "", "```{eval-rst}", f".. automodule:: {name}", "```", ""]
        target = out / f"{room}.md"
        text = "\n".join(lines)
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)


write_api_pages()

GENERATED = HERE / "_generated"


def write_if_changed(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def write_environment_tables() -> None:
    """docs/_generated/environment.md and environment-tests.md: the variables of
    mpinb/environment.py, the one table of them (reference/environment.md includes these)."""
    sys.path.insert(0, str(ROOT))
    from mpinb import environment

    for name, variables in (("environment", environment.VARIABLES), ("environment-tests", environment.TEST_VARIABLES)):
        lines = []
        for v in variables:
            lines += [f"`{v.name}`", f": {v.meaning} Read by {v.read_by}. Values: {v.values}. Default: {v.default}.",
                      ""]
        write_if_changed(GENERATED / f"{name}.md", "\n".join(lines))


write_environment_tables()


def text_of(output: dict) -> str:
    """An output's text: a stream's, or a display's text/plain."""
    stream = output.get("output_type") == "stream"
    text = output["text"] if stream else output.get("data", {}).get("text/plain", "")
    return text if isinstance(text, str) else "".join(text)


def write_first_example() -> None:
    """docs/_generated/first-example.md: the quickstart's first %%mpijax cells and the text of
    their views, from the tutorials' saved run (getting-started.md includes it)."""
    source = EXECUTED / "01_quickstart.ipynb"
    if not source.is_file():
        source = SHIPPED / "01_quickstart.ipynb"
    cells = [c for c in json.loads(source.read_text())["cells"] if c["cell_type"] == "code"][1:3]
    lines = []
    for cell in cells:
        code = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        shown = "\n".join(t.rstrip("\n") for t in map(text_of, cell.get("outputs", [])) if t.strip())
        lines += ["```text", code.rstrip("\n"), "```", "", "```text", shown or "(no saved run: no output)", "```", ""]
    write_if_changed(GENERATED / "first-example.md", "\n".join(lines))


write_first_example()


def _warn_unexecuted(app) -> None:
    from sphinx.util import logging

    for name in UNEXECUTED:
        logging.getLogger(__name__).warning(
            "tutorial %s has no saved run in %s: shown without outputs (run python -m pytest "
            "tests/test_notebooks.py first)", name, EXECUTED.relative_to(ROOT))


def setup(app):
    app.connect("builder-inited", _warn_unexecuted)
