"""``%load_ext mpinb``: the ``%mpijax`` line magic and the ``%%mpijax`` cell magic.

A thin layer: options are parsed here, user mistakes become ``UsageError``, and the work is
done by :class:`mpinb.cluster.mpi_cluster.MPICluster`; the options of a cell travel as one
:class:`mpinb.options.cell_options.CellOptions`, the view's as :class:`mpinb.options.cell_options.ViewOptions`.

The commands of ``%mpijax`` are listed once, in ``COMMANDS`` (each with its line of help and
its options), and the magic's own docstring (``%mpijax?``) is made from it (``usage()``); the
options of ``%mpijax start`` are those of :class:`mpinb.options.cluster_options.ClusterOptions`.
"""

from __future__ import annotations

import argparse
import functools
import shlex
import typing

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from .cells.result import CellResult
from .cluster.mpi_cluster import MPICluster
from .errors import CellFailed, ClusterBusy, ClusterError, ClusterLost, PullError
from .options.cell_options import DEADLOCK_CHOICES, CellOptions, ViewOptions, parse_ranks
from .options.cluster_options import add_arguments, from_arguments, seconds
from .view.magic_words import STOPPED, attached_words, pulled_words, started_words, timeout_words
from .view.start_words import oversubscribed_words
from .view.tables import HloView, StatusTable
from .view.words import RESULT_NAME, restart_words


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"%mpijax: {message}\n{self.format_usage()}")

    def exit(self, status=0, message=None):
        raise UsageError(message or self.format_help())


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (all) or more: {text!r}")
    return value


def _names(text: str) -> list[str]:
    names = [n for n in text.replace(",", " ").split() if n]
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise argparse.ArgumentTypeError(f"not variable names: {', '.join(bad)}")
    return names


@functools.cache
def cell_parser() -> _Parser:
    """The options of %%mpijax, built once (argparse keeps no state between parses; building it
    cost 0.6 ms of each cell)."""
    p = _Parser(prog="%%mpijax", description="Run the cell on every MPI rank and show the ranks side by side.")
    p.add_argument("--ranks", default=None, help="ranks to run on: all (default), 0, 0,2 or 1-3")
    p.add_argument("--compare", action="store_true",
                   help="first run the cell under jax.disable_jit() (bindings rolled back), then jitted, and "
                        "compare the JAX values it assigned and what it printed (side effects happen twice)")
    p.add_argument("--no-hlo", action="store_true", help="do not capture or analyse compiled HLO")
    p.add_argument("--timeout", type=seconds, default=argparse.SUPPRESS,
                   help="seconds to wait for the ranks (default: %%mpijax timeout, initially none)")
    p.add_argument("--show", type=_names, default=[], help="variables to summarise per rank, e.g. 'x,y'")
    p.add_argument("--images", action="store_true", help="draw 2-D arrays among the shown values as images")
    p.add_argument("--setup", action="store_true", help="replay this cell after %%mpijax restart")
    p.add_argument("--deadlock", choices=DEADLOCK_CHOICES, default="restart",
                   help="once ranks are proven to wait for each other forever: end the cell and free them, "
                        "where all wait in receives or checked mpinb collectives, else restarting the engines and "
                        "replaying --setup cells (restart, the default); end it and leave them blocked "
                        "(keep); or seek no proof and wait (off)")
    p.add_argument("--by-rank", action="store_true",
                   help="show every rank in full (default: ranks with the same output grouped)")
    p.add_argument("--max-lines", type=_count, default=200,
                   help="lines of each output stream shown per rank, head and tail (default 200; 0: all)")
    p.add_argument("--no-raise", action="store_true",
                   help="show a failed, dead or unfinished rank without raising CellFailed afterwards "
                        "(for cells that fail on purpose; by default Run All stops at such a cell)")
    return p


def _attach_arguments(a: _Parser) -> None:
    a.add_argument("id", nargs="?", default=None, help="the cluster's id (%%mpijax list; default: the only one)")
    a.add_argument("--force", action="store_true", help="take it over from another kernel that holds it")


def _restart_arguments(r: _Parser) -> None:
    r.add_argument("--no-replay", action="store_true", help="do not replay the --setup cells")


def _hlo_arguments(h: _Parser) -> None:
    h.add_argument("expr", nargs="+", help="a call such as f(x)")
    h.add_argument("--ranks", default=None)


def _pull_arguments(g: _Parser) -> None:
    g.add_argument("name", help="the variable on the engines")
    g.add_argument("--as", dest="local", default=None, help="the notebook's name for it (default: the same)")
    g.add_argument("--max-mib", type=float, default=256.0, help="refuse more than this many MiB (default 256)")
    g.add_argument("--images", action="store_true", help="also draw it (2-D; a 1-D array as one row, "
                   "of more dimensions the first 2-D slice)")


def _timeout_arguments(t: _Parser) -> None:
    t.add_argument("seconds", type=seconds, nargs="?", default="none")


class Command(typing.NamedTuple):
    """A command of %mpijax: its line of help (argparse's) and what adds its arguments to its
    parser (None: it takes none)."""

    help: str
    arguments: typing.Callable | None = None


#: the commands of %mpijax, in the order ``%mpijax?`` lists them
COMMANDS = {
    "start": Command(help="start N MPI engines (the options of mpinb.options.cluster_options.ClusterOptions)",
                     arguments=add_arguments),
    "attach": Command(help="reconnect to a cluster kept alive (or held by another kernel)",
                      arguments=_attach_arguments),
    "list": Command(help="this user's clusters on this host: held, or idle for how long"),
    "clean": Command(help="end the clusters no kernel holds and remove their files"),
    "stop": Command(help="stop the cluster"),
    "restart": Command(help="restart with the same size and replay --setup cells", arguments=_restart_arguments),
    "status": Command(help="show the cluster's state"),
    "hlo": Command(help="per rank, the compiled HLO of a jitted call, layouts highlighted", arguments=_hlo_arguments),
    "pull": Command(help="a variable of every rank as one NumPy array in the notebook", arguments=_pull_arguments),
    "timeout": Command(help="default --timeout of %%%%mpijax cells", arguments=_timeout_arguments),
}


def line_parser() -> _Parser:
    """The commands of %mpijax and their options, from COMMANDS."""
    p = _Parser(prog="%mpijax", description="Manage the MPI engine cluster.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, command in COMMANDS.items():
        parser = sub.add_parser(name, help=command.help)
        if command.arguments is not None:
            command.arguments(parser)
    return p


def usage() -> str:
    """Every command of the magic with its line of help (from COMMANDS), and the cell magic's
    line: the magic's own docstring, what ``%mpijax?`` shows."""
    width = max(map(len, COMMANDS))
    lines = [f"%mpijax {name:<{width}}  {command.help.replace('%%', '%')}" for name, command in COMMANDS.items()]
    return "\n".join([*lines, "%%mpijax [options]  run the cell on every MPI rank (%%mpijax --help: its options)",
                      "%mpijax COMMAND --help: the options of a command"])


@magics_class
class MpiJaxMagics(Magics):
    def __init__(self, shell):
        super().__init__(shell)
        self.cluster: MPICluster | None = None
        self.default_timeout: float | None = None
        self.last_result: CellResult | None = None

    # ------------------------------------------------------------------ dispatch
    @line_cell_magic
    def mpijax(self, line, cell=None):
        if cell is None:
            return self._line(line)
        return self._cell(line, cell)

    def _cell_number(self) -> int:
        """The prompt number of the cell being run, as IPython's own tracebacks name it (IPython 9
        counts ``execution_count`` up before running a cell; the running cell's result keeps the
        number it was given)."""
        running = getattr(getattr(self.shell, "displayhook", None), "exec_result", None)
        count = getattr(running, "execution_count", None)
        return self.shell.execution_count if count is None else count

    def _require_cluster(self) -> MPICluster:
        """The cluster to run on; one whose job is gone, or that ended outside this notebook, too:
        running a cell on it says so (ClusterLost), and what to do."""
        cluster = self.cluster
        if cluster is None or not (cluster.running or cluster.lost or cluster.ended):
            raise UsageError("%mpijax: no cluster running; start one with %mpijax start -n 4")
        return cluster

    def _start(self, args) -> None:
        """%mpijax start: a new cluster with the options given."""
        if self.cluster is not None and self.cluster.running:
            raise UsageError("%mpijax: a cluster is already running; %mpijax stop or restart it first")
        if self.cluster is not None:  # one that ended: what is left of it goes (its standby)
            self.cluster.stop()
        try:
            self.cluster = MPICluster(from_arguments(args))
        except ValueError as exc:
            raise UsageError(f"%mpijax start: {exc}") from exc
        try:
            self.cluster.start()
        except ClusterError as exc:
            raise UsageError(f"%mpijax start: {exc}") from exc
        print(started_words(self.cluster.n, self.cluster.start_seconds))
        for note in self.cluster.notes:
            print(f"note: {oversubscribed_words(**note)}")
        return None

    def _pull(self, args) -> None:
        """%mpijax pull NAME [--as LOCAL]: the global (or stacked per-rank) array, in the notebook."""
        cluster = self._require_cluster()
        local = args.local or args.name
        if not local.isidentifier():
            raise UsageError(f"%mpijax pull: --as needs a Python name, got {local!r}")
        try:
            array = cluster.pull(args.name, max_bytes=int(args.max_mib * (1 << 20)))
        except (PullError, ClusterError) as exc:
            raise UsageError(f"%mpijax pull: {exc}") from exc
        self.shell.user_ns[local] = array
        print(pulled_words(local, array.dtype, array.shape, cluster.n))
        if args.images:
            from .view.images import pulled

            display(pulled(local, array), raw=True)
        return None

    def _attach(self, args) -> None:
        """%mpijax attach [ID] [--force]: this kernel holds a running cluster again."""
        if self.cluster is not None and self.cluster.running:
            raise UsageError("%mpijax attach: this kernel already has a cluster; %mpijax stop it first")
        if self.cluster is not None:  # one that ended: what is left of it goes (its standby)
            self.cluster.stop()
        try:
            self.cluster = MPICluster.attach(args.id, force=args.force)
        except ClusterError as exc:
            raise UsageError(f"%mpijax attach: {exc}") from exc
        print(attached_words(self.cluster.cluster_id, self.cluster.n, len(self.cluster.setup_cells)))

    def _clusters(self, args) -> None:
        """%mpijax list / clean."""
        from .cluster import attach
        from .view.cluster_words import cleaned_words, listing_words

        print(listing_words(attach.listing()) if args.command == "list" else cleaned_words(attach.clean()))

    def _line(self, line: str):
        args = line_parser().parse_args(shlex.split(line))
        cmd = args.command
        if cmd == "start":
            return self._start(args)
        if cmd == "attach":
            return self._attach(args)
        if cmd in ("list", "clean"):
            return self._clusters(args)
        if cmd == "stop":
            if self.cluster is not None:
                self.cluster.stop()
            print(STOPPED)
            return None
        if cmd == "restart":
            if self.cluster is None:
                raise UsageError("%mpijax restart: no cluster was started; use %mpijax start -n N")
            cluster = self.cluster
            try:
                cluster.restart(replay_setup=not args.no_replay)
            except ClusterError as exc:
                raise UsageError(f"%mpijax restart: {exc}") from exc
            print(restart_words(cluster.n, cluster.start_seconds, len(cluster.setup_cells), not args.no_replay,
                                cluster.replayed))
            return None
        if cmd == "status":
            status = StatusTable(self.cluster.status() if self.cluster else {"running": False})
            status["default_timeout"] = self.default_timeout
            return status
        if cmd == "pull":
            return self._pull(args)
        if cmd == "timeout":
            self.default_timeout = args.seconds
            print(timeout_words(args.seconds))
            return None
        if cmd == "hlo":
            from .engine.hlo_capture import compiled_hlo

            cluster = self._require_cluster()
            ranks = parse_ranks(args.ranks, cluster.n)
            expr = " ".join(args.expr)
            try:
                texts = cluster.on_engines(compiled_hlo, expr, ranks=ranks).get()
            except Exception as exc:
                raise UsageError(f"%mpijax hlo {expr}: {exc}") from exc
            result = HloView(dict(zip(ranks, texts, strict=True)))
            display(result)
            return None
        raise UsageError(f"%mpijax: unknown command {cmd}")  # pragma: no cover

    def _cell(self, line: str, cell: str):
        from .view.cell_view import mimebundle
        from .view.live import LiveOutput

        args = cell_parser().parse_args(shlex.split(line))
        cluster = self._require_cluster()
        try:
            ranks = parse_ranks(args.ranks, cluster.n)
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        options = CellOptions(ranks=ranks, compare=args.compare, hlo=not args.no_hlo,
                              timeout=getattr(args, "timeout", self.default_timeout), show=tuple(args.show),
                              images=args.images, setup=args.setup, deadlock=args.deadlock,
                              label=f"In[{self._cell_number()}]",
                              header=f"%%mpijax {line}".rstrip() + "\n")
        live = LiveOutput(ranks, max_lines=args.max_lines)
        try:
            result = cluster.run_cell(cell, options, stream=live)
        except (ClusterBusy, ClusterLost) as exc:
            raise UsageError(f"%%mpijax: {exc}") from None
        finally:
            live.close()
        self.last_result = result
        self.shell.user_ns[RESULT_NAME] = result
        # the view's bundle as it is (raw): IPython's formatter would try its other types on a
        # CellView too, 7% of the notebook's CPU of a trivial cell
        display(mimebundle(result, ViewOptions(by_rank=args.by_rank, max_lines=args.max_lines)), raw=True)
        if not result.ok and not args.no_raise:
            raise CellFailed(result)  # after the view, as %%px raises CompositeError: Run All stops here
        return None


def load_ipython_extension(ipython):
    ipython.register_magics(MpiJaxMagics(ipython))


def unload_ipython_extension(ipython):
    magics = ipython.magics_manager.registry.get("MpiJaxMagics")
    if magics is not None and magics.cluster is not None:
        magics.cluster.stop()


MpiJaxMagics.mpijax.__doc__ = usage()
