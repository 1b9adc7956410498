"""Where a finding's explanation is, seen from where the user's notebook is (the kernel's working
folder, which is the notebook's in JupyterLab and nbclient): a tutorial copied next to the
notebook, or into ``mpinb-tutorials/`` there (``mpinb tutorials``), is linked relatively, so the
link opens in any front end wherever the notebooks live.
Otherwise the words say which document and section, and how to get the tutorials.
"""

from __future__ import annotations

import dataclasses
import os

from ..tutorials import DEFAULT_DIR


@dataclasses.dataclass(frozen=True)
class Reference:
    """Where something is explained: a section of a document that ships with mpinb."""

    document: str    # a tutorial notebook's file name
    anchor: str      # the section's anchor, as JupyterLab names headings
    title: str       # the section's title, in words


#: where a tutorial is looked for, relative to the notebook's folder
FOLDERS = (".", DEFAULT_DIR)


def href(reference, here: str | None = None) -> str | None:
    """A link to the section relative to ``here`` (default: the working folder), or None."""
    here = os.getcwd() if here is None else here
    for folder in FOLDERS:
        if os.path.isfile(os.path.join(here, folder, reference.document)):
            path = reference.document if folder == "." else f"{folder}/{reference.document}"
            return f"{path}#{reference.anchor}"
    return None


def words(reference, here: str | None = None) -> str:
    """'See 02_debugging_transpose.ipynb#What-XLA-compiled' where it is found, else which
    document and section, and how to get it."""
    found = href(reference, here)
    if found:
        return f"See {found}"
    if reference.document.endswith(".ipynb"):
        name = reference.document[:-len(".ipynb")]
        return (f"See the tutorial {name}, section \"{reference.title}\" (mpinb tutorials copies the tutorials "
                "next to your notebooks)")
    return f"See mpinb's {reference.document}, section \"{reference.title}\""
