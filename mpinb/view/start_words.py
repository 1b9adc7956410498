"""How a cluster's start is said: while it runs, the phase, the engines counted, the time, as
text (tqdm's bar outside a notebook) and HTML (mpinb.cluster.progress shows them); once done,
what it found worth a note (more ranks than cores on a host). Pure."""

from __future__ import annotations

import html

from ..analysis.rank_accounts import Difference
from .rank_words import label

#: the phases of a start (mpinb.cluster.mpi_cluster), as the bar names them
START_PHASES = {"controller": "starting the controller", "registering": "engines registering",
                "checking": "checking the ranks", "setup": "setting up the engines", "ready": "ready"}

#: tqdm's format of the text bar: the phase as its description
TEXT_BAR_FORMAT = "{desc}: {n_fmt}/{total_fmt} engines {bar} {elapsed_s:.1f} s"


def oversubscribed_words(host: str, ranks: int, cores: int) -> str:
    """A host that runs more ranks than it has cores (mpinb.analysis.rank_accounts.oversubscribed)."""
    return (f"{ranks} ranks on {host}, which has {cores} cores: fine for correctness "
            "and for teaching (the ranks take turns on the cores); time with one rank per core")


def phase_words(phase: str) -> str:
    return START_PHASES.get(phase, phase)


def counted_words(registered: int, n: int, seconds: float) -> str:
    return f"{registered}/{n} engines {seconds:.1f} s"


def progress_text(phase: str, registered: int, n: int, seconds: float) -> str:
    """'engines registering: 2/4 engines 3.1 s'."""
    return f"{phase_words(phase)}: {counted_words(registered, n, seconds)}"


def progress_html(phase: str, registered: int, n: int, seconds: float) -> str:
    """The same with an HTML progress bar between the phase and the count."""
    bar = f"<progress value='{registered}' max='{n}' style='width:12em'></progress>"
    return (f"<div class='mpinb-start'>{html.escape(phase_words(phase))}: {bar} "
            f"{counted_words(registered, n, seconds)}</div>")


#: how the start names each field the ranks must share (mpinb.analysis.rank_accounts.FIELDS)
FIELD_WORDS = {"python": "Python", "mpinb": "mpinb", "jax": "JAX", "jaxlib": "jaxlib", "mpi4py": "mpi4py",
               "mpi_library": "the MPI library", "mpinb_library": "mpinb's compiled library"}


def difference_words(d: Difference) -> str:
    """'JAX: 0.10.2 on ranks 0-2 (a, b); 0.9.0 on rank 3 (b)', '...; 0.2.0 in the notebook'."""
    parts = [f"{value} on {label(ranks)} ({', '.join(hosts)})" for value, ranks, hosts in d.values]
    if d.notebook is not None:
        parts.append(f"{d.notebook} in the notebook")
    return f"{FIELD_WORDS[d.field]}: {'; '.join(parts)}"


#: what each state of the standby (mpinb.cluster.standby) says in ``%mpijax status``
STANDBY_STATES = {
    "off": "off (--no-standby): a restart starts the cluster anew",
    "slurm_batch": "off: a Slurm batch job has none (a second job would queue for its own nodes)",
    "waiting": "to be prepared once the notebook is idle",
    "preparing": "being prepared",
    "ready": "ready: a restart takes about a second",
    "failed": "failed to start; the next restart starts the cluster anew",
    "stopped": "stopped",
    "taken": "swapped in",
}


def standby_words(state: str, paused: bool = False, memory: int | None = None, failure: str | None = None) -> str:
    """The standby's line of ``%mpijax status``: its state, whether it waits for a cell to end,
    and the memory it holds."""
    said = STANDBY_STATES.get(state, state)
    if paused:
        said += " (stopped while a cell runs)"
    if memory:
        said += f", {memory / 2**30:.1f} GiB of memory" if memory >= 2**30 else f", {memory / 2**20:.0f} MiB of memory"
    if failure:
        said += f" ({failure})"
    return said
