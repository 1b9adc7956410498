"""The workshop notebooks shipped inside the package (``mpinb/tutorials/*.ipynb``) and
``mpinb tutorials [DIR]``, which copies them out for the user.

A copy never replaces a notebook the user changed: the folder keeps a small record
(``.mpinb-tutorials.json``) of what mpinb wrote there, so a notebook still as mpinb wrote it is
brought up to date by a newer mpinb, and any other (edited, or not written by mpinb) is kept
unless ``force``. Copies carry no jupytext pairing (the repository's ``notebooks/*.py`` twins
are for its own diffs): saving one writes nothing beside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from dataclasses import dataclass, field
from importlib import resources

from .tutorials import DEFAULT_DIR

#: the record of what mpinb wrote into a folder: notebook name -> sha256 of the text written
RECORD = ".mpinb-tutorials.json"


def notebooks() -> dict[str, str]:
    """The shipped notebooks, name -> text, in lesson order."""
    folder = resources.files("mpinb.tutorials")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".ipynb"))
    return {name: folder.joinpath(name).read_text(encoding="utf-8") for name in names}


def for_user(text: str) -> str:
    """A notebook as a user's copy: without the repository's jupytext pairing."""
    nb = json.loads(text)
    nb.get("metadata", {}).pop("jupytext", None)
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class CopyReport:
    """What ``copy_tutorials`` did with each notebook."""

    folder: str
    written: list[str] = field(default_factory=list)      # new in the folder
    updated: list[str] = field(default_factory=list)      # mpinb's older copy, unchanged by the user
    unchanged: list[str] = field(default_factory=list)    # already the same
    replaced: list[str] = field(default_factory=list)     # the user's changed copy, replaced (force)
    kept: list[str] = field(default_factory=list)         # the user's changed copy, kept

    def lines(self) -> list[str]:
        out = []
        for what, names in (("copied", self.written), ("updated", self.updated),
                            ("already up to date", self.unchanged),
                            ("replaced your changed copy of", self.replaced)):
            if names:
                out.append(f"{what}: {', '.join(names)}")
        if self.kept:
            out.append(f"kept your changed copy of: {', '.join(self.kept)} "
                       "(mpinb tutorials --force replaces them with mpinb's)")
        first = next(iter(sorted(self.written + self.updated + self.unchanged + self.replaced + self.kept)), "")
        out.append(f"open them with:  cd {shlex.quote(self.folder)} && jupyter lab {first}".rstrip())
        return out


def _read_record(folder: str) -> dict[str, str]:
    try:
        with open(os.path.join(folder, RECORD), encoding="utf-8") as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return {}
    files = record.get("files") if isinstance(record, dict) else None
    return {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}


def _write_record(folder: str, files: dict[str, str]) -> None:
    from . import __version__

    path = os.path.join(folder, RECORD)
    with open(path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump({"mpinb": __version__, "files": files}, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(path + ".tmp", path)


def _current(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def copy_tutorials(folder: str = DEFAULT_DIR, force: bool = False) -> CopyReport:
    """Copy the workshop notebooks into ``folder`` (made if missing); see the module docstring
    for what is kept. Raises ``NotADirectoryError`` when ``folder`` is a file."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(f"mpinb tutorials: {folder} exists and is not a folder")
    os.makedirs(folder, exist_ok=True)
    record = _read_record(folder)
    report = CopyReport(folder)
    for name, text in notebooks().items():
        new = for_user(text)
        path = os.path.join(folder, name)
        old = _current(path)
        if old == new:
            outcome = report.unchanged
        elif old is None:
            outcome = report.written
        elif record.get(name) == _digest(old):
            outcome = report.updated
        elif force:
            outcome = report.replaced
        else:
            report.kept.append(name)
            continue
        if outcome is not report.unchanged:
            with open(path + ".tmp", "w", encoding="utf-8") as fh:
                fh.write(new)
            os.replace(path + ".tmp", path)
        outcome.append(name)
        record[name] = _digest(new)
    _write_record(folder, record)
    return report
