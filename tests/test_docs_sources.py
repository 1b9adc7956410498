"""The documentation's sources, read without building the site (pure): the README a front page
whose links lead somewhere, every page reachable from a toctree, every link between pages and
every anchor real, every benchmark data file valid and drawn on a page, every finding's
explanation a real section of a shipped tutorial, every module saying what it is for (the API
pages show it), and the recipe that .ci/openmpi runs where it looks for it."""

from __future__ import annotations

import ast
import itertools
import json
import re
import sys
import types
from pathlib import Path

import pytest
from support import doc_blocks
from support import prose as sentences_of

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
sys.path.insert(0, str(DOCS / "_ext"))

import architecture  # noqa: E402 - docs/_ext is not a package
import benchmark_figures  # noqa: E402
import plain_docstrings  # noqa: E402

GENERATED = ("_build", "_generated", "api/generated")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```+|~~~+)")


def pages() -> list[Path]:
    """The Markdown pages of docs/ (what the build generates left out)."""
    return sorted(p for p in DOCS.rglob("*.md")
                  if not any(p.relative_to(DOCS).as_posix().startswith(g) for g in GENERATED))


def prose(text: str) -> str:
    """The text outside fenced blocks (code, and directives such as ```{toctree}, read apart)."""
    out, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line.strip())
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip() == fence:
            fence = None
        elif fence is None:
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """The anchor MyST (and GitHub) give a heading: lower case, punctuation dropped, spaces as dashes."""
    text = heading.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a page's headings (of a notebook's Markdown cells)."""
    if path.suffix == ".ipynb":
        text = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"]
                         if c["cell_type"] == "markdown")
    else:
        text = path.read_text()
    return {slug(m.group(2)) for m in re.finditer(r"^(#{1,6}) (.+)$", prose(text), re.M)}


def source_of(dest: Path) -> Path:
    """The file a link leads to, as the sources hold it: docs/tutorials/ is filled by the build
    (docs/conf.py copies each shipped tutorial there), so its notebooks are read where they ship."""
    if dest.parent == DOCS / "tutorials" and dest.suffix == ".ipynb":
        return ROOT / "mpinb" / "tutorials" / dest.name
    return dest


def toctree_entries(page: Path) -> list[Path]:
    """The documents a page's toctrees name, as files."""
    found = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", page.read_text(), re.S):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith(":"):
                found.append((page.parent / line).resolve())
    return found


def broken_links(page: Path) -> list[str]:
    """Relative links of a Markdown file whose file or heading does not exist."""
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # another site: not checked here
        path, _, anchor = target.partition("#")
        dest = source_of((page.parent / path).resolve()) if path else page
        if not dest.exists() or (anchor and dest.suffix in (".md", ".ipynb") and anchor not in anchors(dest)):
            broken.append(target)
    return broken


def test_the_readme_is_a_front_page_under_150_lines():
    text = README.read_text()
    assert len(text.splitlines()) < 150
    for what in ('pip install -e ".[mpich,test]"', "python -m pytest", "import mpinb.mpi as mpi4jax",
                 "%%mpijax", "%load_ext mpinb"):
        assert what in text, what
    for name in ("01_quickstart", "02_debugging_transpose", "03_pencil_fft", "04_jax_native",
                 "05_distributed_cg", "06_hangs"):
        assert name in text, name


def test_every_link_of_the_readme_leads_to_a_file_and_heading():
    assert broken_links(README) == []
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(prose(README.read_text()))}
    assert DOCS / "index.md" in linked


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(DOCS).as_posix())
def test_every_link_of_a_page_leads_to_a_file_and_heading(page):
    assert broken_links(page) == []


def test_every_page_is_in_a_toctree():
    listed = {DOCS / "index.md"}
    for page in pages():
        for entry in toctree_entries(page):
            listed.add(entry.with_suffix(".md") if entry.with_suffix(".md").exists() else entry)
    tutorials = {(DOCS / "tutorials" / f"{p.stem}").resolve() for p in (ROOT / "mpinb" / "tutorials").glob("*.ipynb")}
    assert tutorials <= listed, "every shipped tutorial is a page"
    assert [p.relative_to(DOCS).as_posix() for p in pages() if p not in listed] == []


def test_the_headings_of_a_page_are_consecutive():
    """One title per page, and no level skipped (MyST warns, and -W fails the build)."""
    bad = {}
    for page in pages():
        levels = [len(m.group(1)) for m in re.finditer(r"^(#{1,6}) ", prose(page.read_text()), re.M)]
        if levels[:1] != [1] or levels.count(1) != 1 or any(b > a + 1 for a, b in itertools.pairwise(levels)):
            bad[page.name] = levels
    assert bad == {}


def data_files() -> list[Path]:
    return sorted((DOCS / "data").glob("*.csv"))


@pytest.mark.parametrize("path", data_files(), ids=lambda p: p.name)
def test_each_data_file_is_valid_and_drawn_on_a_page(path):
    table = benchmark_figures.read(path)
    assert table.rows and len(table.series()) >= 2
    assert table.meta["scale"] in ("linear", "log")
    assert all(lo > 0 for _, _, lo, _ in table.rows) or table.meta["scale"] == "linear"
    shown = "".join(p.read_text() for p in pages())
    assert f"/_generated/figures/{path.stem}.svg" in shown


def test_a_data_file_with_a_low_above_its_high_is_refused(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("# title: t\n# ylabel: y\n# scale: linear\n# source: s\ncase,series,low,high\na,b,2,1\n")
    with pytest.raises(ValueError, match="low 2 is above high 1"):
        benchmark_figures.read(bad)
    bad.write_text("# title: t\n# ylabel: y\ncase,series,low,high\n")
    with pytest.raises(ValueError, match="no scale, source"):
        benchmark_figures.read(bad)


def test_a_figure_is_drawn_from_its_numbers(tmp_path):
    out = tmp_path / "f.svg"
    benchmark_figures.draw(benchmark_figures.read(DOCS / "data" / "overlap.csv"), out)
    svg = out.read_text()
    assert svg.startswith("<?xml") and "<svg" in svg
    for label in ("blocking", "overlap", "computation alone", "1024 KiB, 4 sweeps"):
        assert label in svg, label


def test_the_architecture_picture_follows_the_imports():
    graph = architecture.room_graph(ROOT / "mpinb")
    floor = architecture.floors(graph)
    assert "wire" in graph["view"] and "mpi" in graph["engine"]
    assert floor["view"] > floor["wire"] and floor["magic"] > floor["cluster"] > floor["cells"]
    assert {"mpinb", "__main__"}.isdisjoint(graph)
    svg = architecture.svg(graph, {"cluster", "view"})
    assert svg.count("<rect") == len(graph)
    assert ">view/<" in svg and ">magic.py<" in svg
    circles = sum(1 for room, targets in graph.items() for t in targets if floor[t] >= floor[room])
    assert svg.count("url(#up)") == circles  # an import closing a circle is drawn red, never hidden


def test_every_module_says_what_it_is_for():
    """The API pages show each module's first docstring line: none may be missing."""
    silent = []
    for path in sorted((ROOT / "mpinb").rglob("*.py")):
        if path.name == "__main__.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if not doc or not doc.splitlines()[0].strip():
            silent.append(path.relative_to(ROOT).as_posix())
    assert silent == []


def test_each_finding_is_explained_in_a_section_of_a_shipped_tutorial():
    from mpinb.analysis.hlo import KINDS
    from mpinb.view.hlo_words import REFERENCES

    assert set(REFERENCES) == set(KINDS)
    for kind, reference in REFERENCES.items():
        nb = json.loads((ROOT / "mpinb" / "tutorials" / reference.document).read_text())
        headings = {line.lstrip("#").strip() for c in nb["cells"] if c["cell_type"] == "markdown"
                    for line in "".join(c["source"]).splitlines() if line.startswith("#")}
        # JupyterLab names a heading's anchor by its text, spaces as dashes; the title may leave a tail out
        heading = [h for h in headings if h.replace(" ", "-") == reference.anchor]
        assert heading, (kind, reference.anchor, headings)
        assert heading[0].startswith(reference.title), kind


def test_the_open_mpi_recipe_is_where_ci_reads_it():
    """.ci/openmpi runs the first ```bash block after the openmpi-recipe marker of docs/how-to/choose-mpi.md."""
    text = (DOCS / "how-to" / "choose-mpi.md").read_text()
    assert "docs/how-to/choose-mpi.md" in (ROOT / ".ci" / "openmpi").read_text()
    after = text[text.index("<!-- openmpi-recipe"):]
    block = after[after.index("```bash\n") + len("```bash\n"):]
    block = block[: block.index("```")]
    assert "MPINB_MPICC=mpicc.openmpi pip install --no-build-isolation ." in block


NO_SPHINX = types.SimpleNamespace(env=None)  # what as_written reads of Sphinx's application, outside a build


def test_a_docstring_docutils_would_misread_is_shown_as_written():
    table = ["What a rank says of itself:", "    host, cores, versions", "and whether the library loads."]
    assert plain_docstrings.complaints("\n".join(table))
    lines = list(table)
    plain_docstrings.as_written(NO_SPHINX, "module", "m", None, {}, lines)
    assert lines[:2] == ["::", ""] and lines[2:-1] == ["    " + line if line else "" for line in table]
    fine = ["What it does, with ``code`` and :func:`a_sphinx_role`.", "", "- a list", "- of two"]
    assert plain_docstrings.complaints("\n".join(fine)) == []
    lines = list(fine)
    plain_docstrings.as_written(NO_SPHINX, "module", "m", None, {}, lines)
    assert lines == fine


@pytest.mark.parametrize("page", doc_blocks.pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_mpinb_name_a_page_mentions_exists(page):
    missing = []
    for name in sorted(doc_blocks.dotted_names(page)):
        try:
            doc_blocks.resolve(name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{name}: {exc}")
    assert missing == []


#: the field's sentence length (ipyparallel's documentation: 14.5 words on average, no page above
#: 18.2, its longest sentences about 40 words), with room for a page of short lists
MEAN_WORDS, LONGEST_WORDS = 18.5, 40


@pytest.mark.parametrize("page", doc_blocks.pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_sentences_are_as_short_as_the_field_s(page):
    mean, longest, count = sentences_of.stats(page.read_text())
    assert count == 0 or (mean <= MEAN_WORDS and longest <= LONGEST_WORDS), (round(mean, 1), longest)


def test_the_sentence_count_sees_sentences_and_leaves_code_out():
    text = ("# Title\n\nOne two three. Four five `mpinb.mpi` six.\n\n```python\nnot counted at all here\n```\n"
            "- a list item of five words\n| a | table |\n")
    assert sentences_of.sentences(text) == [3, 4, 6]
