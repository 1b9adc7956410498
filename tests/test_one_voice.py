"""One voice, read from the source (pure: nothing is run): the sentences a user reads are
written in mpinb/view/; the cluster, the cells and the analysis return and raise facts,
mpinb/errors.py holds facts and imports neither the view nor the analysis, and the magic's and
command line's messages come from the view. What a rule looks for: a string literal or f-string of more than MAX_WORDS
words outside a docstring. Exempt by rule: the text of ``ValueError``/``TypeError`` (a bad
argument, said to the programmer as Python does), of IPython's ``UsageError`` and argparse's
``ArgumentTypeError`` and ``parser.error`` (the magic's and the command line's usage), and
argparse's help (the commands' documentation).
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "mpinb"

#: more words than this in one literal is a sentence
MAX_WORDS = 3

#: the folders and modules that must not build sentences
CLEANED = ("cluster", "cells", "launch", "engine", "wire", "analysis", "errors.py", "cli.py", "magic.py")

#: the exceptions whose text is exempt (see the module's docstring)
ARGUMENT_ERRORS = {"ValueError", "TypeError", "UsageError", "ArgumentTypeError", "error"}

#: why a traceback's lines are left on the engine
TRACEBACK = "left: the traceback as IPython writes it, made where the frames are"

#: sentences left where they are, with why (module, the sentence's first words)
EXEMPT = {
    ("cluster/watchdog.py", "usage: python -m"): "the watchdog's own command line, run by mpinb, not by a user",
    ("cluster/watchdog.py", "mpinb watchdog: cluster"): "the watchdog's log line on its own stderr (its log file)",
    ("cells/rank_task.py", "mpinb: this ipyparallel's"): "an invariant of ipyparallel's internals, for a developer",
    ("cells/rank_task.py", "the rank's result"): "ipyparallel's TimeoutError of a wait, caught by mpinb's callers",
    ("launch/launchers.py", "job %i %T %r"): "squeue's output format, read by mpinb, not a sentence",
    ("launch/launchers.py", "#!/bin/sh"): "the batch script given to sbatch, not a sentence",
    ("launch/mpi_impl.py", "\nimport json, re"): "the probe's Python code, run in a child process",
    ("launch/rank.py", "usage: python -m"): "the rank wrapper's own command line, run by the launcher, not by a user",
    # left (engine side): these travel as text in a rank's record or a RemoteError, where the
    # notebook's voice is not; each needs its record to carry facts first
    ("engine/execute.py", "a call that this"): "left: QueuedCallFreed's text, in the rank's error record",
    ("engine/jax_processes.py", "--jax-distributed: rank 0's host name {} does"): "left: an engine's setup error",
    ("engine/jax_processes.py", "--jax-distributed: rank 0's host name {} resolves"): "left: an engine's setup error",
    ("engine/self_account.py", "does not load:"): "left: the library's state, compared as text by analysis",
    ("engine/self_account.py", "built for {}, but"): "left: the library's state, compared as text by analysis",
    ("engine/tracebacks.py", "Cell {}, line {}{}"): TRACEBACK,
    ("engine/tracebacks.py", "File {}:{}, in {}"): TRACEBACK,
    ("engine/tracebacks.py", "(JAX raised it"): TRACEBACK,
    ("engine/tracebacks.py", "The above exception"): "left: Python's own traceback words, as Python writes them",
    ("engine/tracebacks.py", "During handling of"): "left: Python's own traceback words, as Python writes them",
    ("engine/tracebacks.py", "{}Traceback (most recent"): "left: Python's own traceback words, as Python writes them",
    ("engine/tracebacks.py", "Cell {}, line {}"): TRACEBACK,
    ("wire/values.py", "{}  no block on"): "left: a value's summary line, written with the summary on the engine",
    ("wire/values.py", "{}min {} max"): "left: a value's summary line, written with the summary on the engine",
    ("cli.py", "mpinb: distributed JAX"): "argparse's description of the command line: its documentation",
    ("cli.py", "Copy the workshop"): "argparse's description of the command line: its documentation",
    ("cli.py", "Write the IPython profile"): "argparse's description of the command line: its documentation",
    ("cluster/profile.py", "# Written by `mpinb"): "the profile's configuration file, Python with its comment",
    ("magic.py", "Run the cell on"): "argparse's description of the magic: its documentation",
    ("magic.py", "Manage the MPI engine"): "argparse's description of the magic: its documentation",
    ("magic.py", "%%mpijax [options]  run"): "the magic's docstring (%mpijax?): its documentation",
    ("magic.py", "%mpijax COMMAND --help"): "the magic's docstring (%mpijax?): its documentation",
}


def words_of(node: ast.AST) -> str | None:
    """The text of a string literal or f-string (each placeholder as one word), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def exempt_nodes(tree: ast.AST) -> set[int]:
    """Docstrings, the parts of f-strings, and every string inside the call of an argument error
    or inside a ``help=`` keyword."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and words_of(body[0].value) is not None):
            out.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            out.update(id(v) for v in node.values)
        inside = []
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ARGUMENT_ERRORS:
            inside.append(node)
        if isinstance(node, ast.keyword) and node.arg == "help":
            inside.append(node.value)
        for part in inside:
            out.update(id(n) for n in ast.walk(part))
    return out


def sentences(source: str) -> list[tuple[int, str]]:
    """(line, text) of every literal of more than MAX_WORDS words in ``source``, exemptions by rule left out."""
    tree = ast.parse(source)
    skip = exempt_nodes(tree)
    found = []
    for node in ast.walk(tree):
        text = words_of(node)
        if text is not None and id(node) not in skip and len(text.split()) > MAX_WORDS:
            found.append((node.lineno, text))
    return sorted(found)


def cleaned_files() -> list[pathlib.Path]:
    out = []
    for name in CLEANED:
        path = PACKAGE / name
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def test_the_finder_finds_a_sentence_and_leaves_what_the_rules_exempt():
    source = '''
"""A docstring of many words is no sentence to a user."""
def f(n):
    """Nor is this one, however long."""
    if n < 0:
        raise ValueError(f"f: n must be at least zero, got {n}")
    parser.add_argument("-n", help="number of ranks to start with")
    raise ClusterError(f"the cluster of {n} ranks is gone")
'''
    assert sentences(source) == [(8, "the cluster of {} ranks is gone")]


def test_the_client_the_analysis_the_errors_the_magic_and_the_command_line_build_no_sentences():
    found = []
    for path in cleaned_files():
        module = str(path.relative_to(PACKAGE))
        for line, text in sentences(path.read_text()):
            if not any(module == m and text.startswith(start) for m, start in EXEMPT):
                found.append(f"{module}:{line}: {text[:70]!r}")
    assert not found, "sentences outside mpinb/view/ (word them there from facts):\n" + "\n".join(found)


def test_every_exemption_is_still_needed():
    """An exemption whose sentence moved to the view goes too."""
    left = {(str(p.relative_to(PACKAGE)), text) for p in cleaned_files() for _, text in sentences(p.read_text())}
    stale = [key for key in EXEMPT if not any(m == key[0] and text.startswith(key[1]) for m, text in left)]
    assert not stale, stale


def test_errors_import_neither_the_view_nor_the_analysis():
    """mpinb.errors holds facts; the view gives them words (``errors.give_voice``), never the other way."""
    tree = ast.parse((PACKAGE / "errors.py").read_text())
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            imported.append(("." * node.level) + (node.module or ""))
            imported += [f"{'.' * node.level}{node.module or ''}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
    wrong = [name for name in imported if any(part in ("view", "analysis") for part in name.replace(".", " ").split())]
    assert not wrong, wrong


def test_the_cluster_gives_the_errors_their_voice():
    """Whoever uses a cluster, from the magic or plain Python, imports mpinb.cluster.mpi_cluster: its errors read
    as sentences there (mpinb.view.error_words), and list their facts elsewhere."""
    import mpinb.cluster.mpi_cluster  # noqa: F401
    from mpinb import errors
    from mpinb.view.error_words import error_words, lost_words

    lost = errors.ClusterLost(cause="job_gone", lost={"rank": 1, "returncode": 3})
    assert errors._voice is error_words
    assert str(lost) == lost_words(**lost.facts) and lost.lost == {"rank": 1, "returncode": 3}
    assert errors.fact_listing(lost) == "job_gone: lost={'rank': 1, 'returncode': 3}"
    assert str(errors.ClusterLost(cause="job_gone", why="no such fact")) == "job_gone: why='no such fact'"
    assert str(errors.LauncherError("mpiexec not found")) == "mpiexec not found"
