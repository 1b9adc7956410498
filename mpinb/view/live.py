"""Each rank's output and state while a cell runs: in a notebook one box per rank (its state
and time above, what it printed below), elsewhere ``[stdout:N]`` prefixed lines. The final view
replaces the boxes when the cell ends.

In a notebook the boxes are one display, redrawn in place (``update_display_data``), not
ipywidgets ``Output`` areas: a headless client (``jupyter execute``, papermill, ``nbconvert
--execute``, all nbclient) answers every output captured in an ``Output`` widget with a message on
the shell channel while it waits for the cell's reply on that same socket, and that send can
swallow the reply's wake-up, so that the run stalls for the client's whole cell timeout, or for
ever without one (docs/how-to/headless.md, "A headless run stalls"). A display update asks
nothing of the client.
"""

from __future__ import annotations

import html
import sys
import time

from .cell_view import RANKS_PER_PAGE, in_notebook
from .html import BORDER, NEUTRAL, SEVERITY_COLORS, STATE_COLORS
from .rank_words import label
from .words import live_words

#: a live display larger than this is redrawn at most once a second (each redraw sends it whole)
LARGE = 64 * 1024


class LiveOutput:
    """Streams each rank's output while a cell runs, throttled: in a notebook as one display of
    a box per rank, redrawn in place; elsewhere as ``[stdout:N]`` prefixed lines. At most
    ``max_lines`` lines per rank are streamed (the final view has the head and tail of
    everything, the result all of it); text is sent at most every ``interval`` seconds
    (``tick()``, called by the cell's wait loop, sends what is due even when no new text
    comes). Above each rank's box, its state and time while the cell runs (``state()``)."""

    def __init__(self, ranks, rich: bool | None = None, max_lines: int | None = 200,
                 interval: float = 0.2, state_interval: float = 0.5):
        self.ranks = list(ranks)
        self.state_interval = state_interval
        self.rich = in_notebook() if rich is None else rich
        self.max_lines = max_lines or None
        self.interval = interval
        self.handle = None
        self.pending: dict[tuple[int, str], str] = {}   # (rank, stream) -> text not yet sent
        self.lines: dict[int, int] = dict.fromkeys(self.ranks, 0)
        self.cut: set[int] = set()
        self.last_flush: float | None = None  # never: the first text goes out at once
        self.shown: dict[int, list[tuple[str, str]]] = {r: [] for r in self.ranks}  # rank -> (stream, text) sent
        self.states: dict[int, tuple[str, str]] = {}  # rank -> (state, words) shown in its header
        self.last_states: float | None = None         # when the headers were last updated
        self.drawn = ""                               # the display's HTML as last sent
        self.last_drawn: float | None = None
        if self.rich:
            from IPython.display import display

            self.handle = display(self.bundle(), raw=True, display_id=True)
            self.drawn = self.html()

    def __call__(self, rank: int, stream: str, text: str) -> None:
        if self.rich and stream == "error":
            return  # the final view shows errors with their traceback
        if rank in self.cut:
            return
        if self.max_lines is not None and stream != "error":
            room = self.max_lines - self.lines.get(rank, 0)
            lines = text.splitlines(True)
            if len(lines) > room:
                text = "".join(lines[:max(room, 0)])
                text += ("" if not text or text.endswith("\n") else "\n")
                text += f"... (rank {rank}: more output, shown when the cell ends)\n"
                self.cut.add(rank)
            self.lines[rank] = self.lines.get(rank, 0) + text.count("\n")
        if stream == "error" and not text.endswith("\n"):
            text += "\n"
        self.pending[(rank, stream)] = self.pending.get((rank, stream), "") + text
        self.tick()

    def state(self, rank: int, state: str, seconds: float, inflight: dict | None, error_name: str | None,
              where: dict | None = None) -> None:
        """Show where ``rank`` is (its header, above its output; in a notebook only): running for
        how long, in which collective and at which line, or finished or failed, updated at most
        every ``state_interval`` seconds."""
        if not self.rich or rank not in self.shown:
            return
        self.states[rank] = (state, live_words(state, seconds, inflight, error_name, where))
        now = time.monotonic()
        if self.last_states is not None and now - self.last_states < self.state_interval:
            return
        self.last_states = now
        self._redraw(force=True)

    def tick(self) -> None:
        """Send what is held if the interval is up."""
        if self.pending and (self.last_flush is None or time.monotonic() - self.last_flush >= self.interval):
            self.flush()
        elif self.rich:
            self._redraw()

    def _send(self, rank: int, stream: str, text: str) -> None:
        if self.rich:
            self.shown.setdefault(rank, []).append((stream, text))
            return
        prefix = f"[{stream}:{rank}] "
        sys.stdout.write("".join(prefix + line + "\n" for line in text.rstrip("\n").split("\n")))

    def flush(self, partial: bool = False) -> None:
        """Send what is held: whole lines only (a line's end may be in the next chunk), or
        everything with ``partial``."""
        self.last_flush = time.monotonic()
        for key in list(self.pending):
            text = self.pending[key]
            cut = len(text) if partial else text.rfind("\n") + 1
            if cut:
                self._send(*key, text[:cut])
            rest = text[cut:]
            if rest:
                self.pending[key] = rest
            else:
                del self.pending[key]
        if self.rich:
            self._redraw(force=partial)
        else:
            sys.stdout.flush()

    def _redraw(self, force: bool = False) -> None:
        """Draw the display again if it changed (a large one at most once a second)."""
        if self.handle is None:
            return
        page = self.html()
        if page == self.drawn:
            return
        now = time.monotonic()
        if (not force and len(page) > LARGE and self.last_drawn is not None and now - self.last_drawn < 1.0):
            return
        self.handle.update(self.bundle(page), raw=True)
        self.drawn, self.last_drawn = page, now

    # -- what the display shows: the same facts in HTML and in text ------------------------------

    def _state_of(self, rank: int) -> tuple[str, str]:
        return self.states.get(rank, ("starting", ""))

    @staticmethod
    def _header(rank: int, state: str, words: str) -> str:
        color = STATE_COLORS.get(state, NEUTRAL)
        detail = (f" <span class='mpinb-live-state' data-state='{state}' style='color:{color}'>"
                  f"{html.escape(words)}</span>")
        return f"<div class='mpinb-live' data-rank='{rank}'><b>rank {rank}</b>{detail if words else ''}</div>"

    def _box(self, rank: int) -> str:
        """What ``rank`` printed, in a box that keeps its last lines in sight (a reversed column
        scrolls from the bottom) and grows up to 12 lines."""
        body = "".join(
            f"<span class='mpinb-live-stderr' style='color:{SEVERITY_COLORS['error']}'>{html.escape(text)}</span>"
            if stream != "stdout" else html.escape(text)
            for stream, text in self.shown.get(rank, []))
        return (f"<div class='mpinb-live-output-{rank}' style='min-height:1.5em;max-height:12em;overflow:auto;"
                f"display:flex;flex-direction:column-reverse;border:1px solid {BORDER}'>"
                "<pre style='margin:0;padding:2px 4px;font-size:12px;white-space:pre-wrap;"
                f"background:transparent'>{body}</pre></div>")

    def html(self) -> str:
        """The boxes of the first RANKS_PER_PAGE ranks side by side, and which ranks are left out."""
        columns = "".join(
            f"<div class='mpinb-live-column' style='flex:1 1 0;min-width:14em'>"
            f"{self._header(r, *self._state_of(r))}{self._box(r)}</div>"
            for r in self.ranks[:RANKS_PER_PAGE])
        more = self.ranks[RANKS_PER_PAGE:]
        rest = (f"<div class='mpinb-live-more'>{html.escape(self.more_words(more))}</div>" if more else "")
        return f"<div class='mpinb-live-view' style='display:flex;flex-flow:row wrap;gap:4px'>{columns}</div>{rest}"

    @staticmethod
    def more_words(ranks: list[int]) -> str:
        return f"{label(ranks)}: their output shows when the cell ends"

    def text(self) -> str:
        """The same facts as plain text: each shown rank's state, then its lines."""
        out = []
        for rank in self.ranks[:RANKS_PER_PAGE]:
            _state, words = self._state_of(rank)
            out.append(f"[rank {rank}] {words}".rstrip())
            printed = "".join(text for _stream, text in self.shown.get(rank, []))
            out.extend("  " + line for line in printed.rstrip("\n").split("\n") if printed)
        more = self.ranks[RANKS_PER_PAGE:]
        if more:
            out.append(self.more_words(more))
        return "\n".join(out)

    def bundle(self, page: str | None = None) -> dict:
        return {"text/plain": self.text(), "text/html": self.html() if page is None else page}

    def close(self) -> None:
        """Send the rest and remove the live display (the final view replaces it)."""
        self.flush(partial=True)
        if self.handle is not None:  # empty in every format (no "<HTML object>" in a text rendering)
            self.handle.update({"text/plain": "", "text/html": ""}, raw=True)
