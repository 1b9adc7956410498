"""The ranks compared before the first cell (mpinb.analysis.rank_accounts), on made-up accounts (pure)."""

import time

import pytest

from mpinb.analysis.rank_accounts import differences, oversubscribed
from mpinb.cluster.start_checks import ask_every_engine
from mpinb.engine.self_account import package_versions, report
from mpinb.errors import EngineSetupError
from mpinb.view.start_words import difference_words, oversubscribed_words

SAME = {"python": "3.11.7", "mpinb": "0.1.0", "jax": "0.10.2", "jaxlib": "0.10.2", "mpi4py": "4.1.2",
        "mpi_library": "MPICH Version: 5.0.2", "mpinb_library": "ok", "cores": 2}


def ranks(*changes, hosts=("a", "a", "b", "b")):
    out = []
    for rank, host in enumerate(hosts):
        account = dict(SAME, rank=rank, host=host)
        for changed_rank, field, value in changes:
            if changed_rank == rank:
                account[field] = value
        out.append(account)
    return out


def said(reports, notebook):
    """The differences as the start's message lists them."""
    return [difference_words(d) for d in differences(reports, notebook)]


def test_equal_ranks_and_notebook_pass():
    assert differences(ranks(), {k: SAME[k] for k in ("python", "mpinb", "jax", "jaxlib", "mpi4py")}) == []


def test_a_rank_with_another_version_is_named_with_its_host():
    found = said(ranks((3, "jax", "0.9.0")), {})
    assert found == ["JAX: 0.10.2 on ranks 0-2 (a, b); 0.9.0 on rank 3 (b)"]


def test_the_notebook_s_own_version_counts():
    found = said(ranks(), {"mpinb": "0.2.0", "mpi_library": None})
    assert found == ["mpinb: 0.1.0 on ranks 0-3 (a, b); 0.2.0 in the notebook"]


def test_another_mpi_library_and_a_library_that_does_not_load_are_both_named():
    found = said(ranks((2, "mpi_library", "Open MPI v4.1.4"),
                              (2, "mpinb_library", "built for MPICH, but mpi4py loaded Open MPI")), {})
    assert found == [
        "the MPI library: MPICH Version: 5.0.2 on ranks 0-1,3 (a, b); Open MPI v4.1.4 on rank 2 (b)",
        "mpinb's compiled library: ok on ranks 0-1,3 (a, b); built for MPICH, but mpi4py loaded Open MPI on "
        "rank 2 (b)",
    ]


def test_a_library_that_does_not_load_anywhere_is_named_too():
    found = said([dict(r, mpinb_library="does not load: libmpi.so.12") for r in ranks()], {})
    assert found == ["mpinb's compiled library: does not load: libmpi.so.12 on ranks 0-3 (a, b)"]


def test_more_ranks_than_cores_is_a_note_per_host():
    notes = oversubscribed(ranks(hosts=("a", "a", "a", "b")))
    assert notes == [{"host": "a", "ranks": 3, "cores": 2}], notes
    assert oversubscribed_words(**notes[0]).startswith("3 ranks on a, which has 2 cores:")
    assert oversubscribed(ranks()) == []


def test_this_process_s_own_account():
    """What an engine reports, here in one process: the versions from the metadata, the MPI
    mpi4py loaded, and mpinb's library loading with it."""
    mine = report()
    assert mine["rank"] == 0 and mine["cores"] >= 1
    assert {k: mine[k] for k in package_versions()} == package_versions()
    assert mine["mpinb_library"] == "ok" and mine["mpi_library"]


class Answer:
    """An engine's answer as ipyparallel's AsyncResult gives it: pending (None), a value, or an error."""

    def __init__(self, value=None, error=None):
        self.value, self.error = value, error

    def ready(self):
        return self.value is not None or self.error is not None

    def wait(self, timeout=None):
        if not self.ready():  # never answers: the whole time passes
            time.sleep(timeout)
        return self.ready()

    def successful(self):
        return self.error is None

    def get(self):
        if self.error is not None:
            raise self.error
        return self.value


class Engines:
    """A cluster whose engines answer as told (``answers``: rank -> Answer)."""

    def __init__(self, answers, ended=None, start_timeout=0.5):
        self.answers, self.ended, self.start_timeout = answers, ended, start_timeout
        self.client = self

    @property
    def ids(self):
        return list(self.answers)

    def on_engines(self, fn, *args, ranks):
        return self.answers[ranks]

    def launcher_ended(self):
        return self.ended


class Remote(Exception):
    ename, evalue = "RuntimeError", "no backend"


def test_every_engine_s_answer_in_rank_order():
    assert ask_every_engine(Engines({1: Answer("b"), 0: Answer("a")}), "q", len) == ["a", "b"]


def test_ranks_that_do_not_answer_are_named_after_start_timeout():
    started = time.monotonic()
    with pytest.raises(EngineSetupError, match=r"the ranks' check: ranks 1, 3 of 4 did not answer \(waited 0.5 s"):
        ask_every_engine(Engines({0: Answer(1), 1: Answer(), 2: Answer(1), 3: Answer()}), "check", len)
    assert 0.5 <= time.monotonic() - started < 5


def test_an_error_ends_the_wait_at_once_even_while_others_are_silent():
    engines = Engines({0: Answer(), 1: Answer(error=Remote())}, start_timeout=60)
    started = time.monotonic()
    with pytest.raises(EngineSetupError, match=r"the engines' setup failed on rank 1: RuntimeError: no backend$"):
        ask_every_engine(engines, "setup", len)
    assert time.monotonic() - started < 5


def test_the_lowest_failed_rank_is_named_whichever_failed_first():
    """Ranks that fail alike fail within moments of each other: the words are the lowest's."""
    answers = {0: Answer(), 1: Answer(error=Remote()), 2: Answer(error=Remote())}
    engines = Engines(answers, start_timeout=60)
    real_wait = Answer.wait

    def rank_0_fails_a_moment_later(self, timeout=None):
        if self is answers[0]:
            self.error = Remote()
        return real_wait(self, timeout)

    Answer.wait = rank_0_fails_a_moment_later
    try:
        with pytest.raises(EngineSetupError, match=r"failed on rank 0: RuntimeError: no backend \(and on ranks 1-2\)"):
            ask_every_engine(engines, "setup", len)
    finally:
        Answer.wait = real_wait


def test_a_launcher_that_ended_ends_the_wait_at_once():
    engines = Engines({0: Answer(), 1: Answer("x")}, ended=137, start_timeout=60)
    with pytest.raises(EngineSetupError,
                       match=r"rank 0 of 2 did not answer \(the MPI launcher ended \(exit status 137"):
        ask_every_engine(engines, "q", len)
