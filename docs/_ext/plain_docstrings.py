"""Docstrings that are not reStructuredText shown as written, not misread.

mpinb's docstrings are prose for people reading the source: most read as reStructuredText too,
but some hold a table lined up by hand, an indented continuation, or ``*args``, which docutils
would misread and warn about (a failure under ``sphinx-build -W``). Each docstring is parsed
once on its own; one that docutils would warn about is shown as a literal block, exactly as in
the source. Sphinx's own roles (``:func:``) are unknown to plain docutils and are not counted.
"""

from __future__ import annotations

import docutils.frontend
import docutils.parsers.rst
import docutils.utils

#: messages of plain docutils that Sphinx resolves itself
SPHINX_ONLY = ("Unknown interpreted text role", "No role entry for", "Unknown directive type")


def complaints(text: str, env=None) -> list:
    """What docutils says about a docstring at warning level or above (Sphinx-only roles left out;
    ``env``: Sphinx's build environment, which its roles read once Sphinx has registered them)."""
    found = []

    def observe(message):
        if message["level"] >= docutils.utils.Reporter.WARNING_LEVEL and \
                not any(s in message.astext() for s in SPHINX_ONLY):
            found.append(message.astext())

    settings = docutils.frontend.get_default_settings(docutils.parsers.rst.Parser)
    settings.env = env
    document = docutils.utils.new_document("<docstring>", settings)
    document.reporter.stream = None
    document.reporter.report_level = docutils.utils.Reporter.SEVERE_LEVEL + 1
    document.reporter.attach_observer(observe)
    docutils.parsers.rst.Parser().parse(text, document)
    return found


def as_written(app, what, name, obj, options, lines: list) -> None:
    """autodoc-process-docstring: a docstring docutils would misread becomes a literal block."""
    if lines and complaints("\n".join(lines), app.env):
        lines[:] = ["::", "", *("    " + line if line else "" for line in lines), ""]


def setup(app):
    app.connect("autodoc-process-docstring", as_written)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
