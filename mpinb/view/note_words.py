"""How the notes above a cell's view are said: each note of a result (mpinb.cells.result.Note)
is a cause and its facts (a proven deadlock, the MPI job's end, the cluster's end outside the
notebook, what to do about ranks still running, ranks freed, messages dropped, the engines
restarted, a watchdog replaced), worded here. Pure: no IPython.
"""

from __future__ import annotations

from .deadlock_words import deadlock_words
from .outside_end_words import ended_words
from .words import dropped_words, freed_words, lost_job_words, restart_words, way_out


def deadlock_note_words(deadlock) -> list[str]:
    """The proven deadlock (mpinb.analysis.deadlock.Deadlock) in one sentence."""
    return [deadlock_words(deadlock)]


def job_ended_note_words(lost: dict) -> list[str]:
    return [f"the MPI job ended because {lost_job_words(lost)}: run %mpijax restart"]


def ended_outside_note_words(ended: dict, replayed: int) -> list[str]:
    return [ended_words(ended, replayed)]


def watchdog_replaced_note_words(cause: str) -> list[str]:
    return ["the cluster's watchdog had ended (killed?); a new one watches the cluster"]


def hlo_capture_off_note_words() -> list[str]:
    return ["HLO capture is off on some ranks (JAX was imported before mpinb set XLA_FLAGS)"]


def freed_note_words(freed: list[int], dropped: dict) -> list[str]:
    return [freed_words(freed, dropped)]


def dropped_note_words(dropped: dict) -> list[str]:
    return [dropped_words(dropped)]


def restart_note_words(n: int, seconds: float, replayed: int, cells: list | None = None) -> list[str]:
    return ["to free them, " + restart_words(n, seconds, replayed, True, cells)]


def restart_failed_note_words(problem: str) -> list[str]:
    return [f"restarting the engines after the deadlock failed ({problem}): run %mpijax restart"]


#: the words of each cause of a note: its facts -> its lines
NOTE_WORDS = {
    "deadlock": deadlock_note_words,
    "job_ended": job_ended_note_words,
    "ended_outside": ended_outside_note_words,
    "watchdog_replaced": watchdog_replaced_note_words,
    "way_out": way_out,
    "hlo_capture_off": hlo_capture_off_note_words,
    "freed": freed_note_words,
    "dropped": dropped_note_words,
    "restarted": restart_note_words,
    "restart_failed": restart_failed_note_words,
}


def note_lines(note) -> list[str]:
    """The lines one note says (way_out may say one per kind of rank still running)."""
    return NOTE_WORDS[note.cause](**note.facts)


def notes_of(result) -> list[str]:
    """Every note of ``result`` in words, in order: the lines the view shows above the ranks."""
    return [line for note in result.notes for line in note_lines(note)]
