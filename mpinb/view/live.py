"""Each rank's output and state while a cell runs: in a notebook one box per rank (its state
and time above, what it printed below), elsewhere ``[stdout:N]`` prefixed lines. The final view
replaces the boxes when the cell ends.
"""

from __future__ import annotations

import html
import sys
import time

from .html import STATE_COLORS
from .widgets import RANKS_PER_PAGE, widgets_available
from .words import live_words


class LiveOutput:
    """Streams each rank's output while a cell runs, throttled and appended: in a notebook into
    one ipywidgets ``Output`` area per rank (what is printed inside it is appended by the front
    end, never resent), elsewhere as ``[stdout:N]`` prefixed lines. At most ``max_lines`` lines
    per rank are streamed (the final view has the head and tail of everything, the result all
    of it); text is sent at most every ``interval`` seconds (``tick()``, called by the cell's
    wait loop, sends what is due even when no new text comes). Above each rank's area, its
    state and time while the cell runs (``state()``)."""

    def __init__(self, ranks, use_widgets: bool | None = None, max_lines: int | None = 200,
                 interval: float = 0.2, state_interval: float = 0.5):
        self.ranks = list(ranks)
        self.state_interval = state_interval
        self.use_widgets = widgets_available() if use_widgets is None else use_widgets
        self.max_lines = max_lines or None
        self.interval = interval
        self.handle = None
        self.areas = {}
        self.pending: dict[tuple[int, str], str] = {}   # (rank, stream) -> text not yet sent
        self.lines: dict[int, int] = dict.fromkeys(self.ranks, 0)
        self.cut: set[int] = set()
        self.last_flush: float | None = None  # never: the first text goes out at once
        self.headers = {}
        self.states: dict[int, tuple[str, str]] = {}  # rank -> (state, words) shown in its header
        self.last_states: float | None = None         # when the headers were last updated
        if self.use_widgets:
            import ipywidgets as w
            from IPython.display import display

            # the column grows sideways; the output area inside it takes the height of its text
            # (a flex basis of 0 in a column would give it none), up to 12 lines, then scrolls
            self.areas = {r: w.Output(layout=w.Layout(min_height="1.5em", max_height="12em", overflow="auto",
                                                      border="1px solid #ddd"))
                          for r in self.ranks}
            self.headers = {r: w.HTML(self._header(r, "starting", "")) for r in self.ranks}
            columns = [w.VBox([self.headers[r], self.areas[r]], layout=w.Layout(flex="1 1 0", min_width="14em"))
                       for r in self.ranks[:RANKS_PER_PAGE]]
            for r, column in zip(self.ranks, columns, strict=False):
                column.add_class("mpinb-live-column")
                self.areas[r].add_class(f"mpinb-live-output-{r}")
            self.handle = display(w.HBox(columns, layout=w.Layout(flex_flow="row wrap")), display_id=True)

    def __call__(self, rank: int, stream: str, text: str) -> None:
        if self.use_widgets and stream == "error" and rank in self.areas:
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

    @staticmethod
    def _header(rank: int, state: str, words: str) -> str:
        color = STATE_COLORS.get(state, "#555")
        detail = (f" <span class='mpinb-live-state' data-state='{state}' style='color:{color}'>"
                  f"{html.escape(words)}</span>")
        return f"<div class='mpinb-live' data-rank='{rank}'><b>rank {rank}</b>{detail if words else ''}</div>"

    def state(self, rank: int, state: str, seconds: float, inflight: dict | None, error_name: str | None,
              where: dict | None = None) -> None:
        """Show where ``rank`` is (its header, above its output; widgets only): running for how
        long, in which collective and at which line, or finished or failed, updated at most
        every ``state_interval`` seconds."""
        if rank not in self.headers:
            return
        self.states[rank] = (state, live_words(state, seconds, inflight, error_name, where))
        now = time.monotonic()
        if self.last_states is not None and now - self.last_states < self.state_interval:
            return
        self.last_states = now
        for r, (st, words) in self.states.items():
            value = self._header(r, st, words)
            if self.headers[r].value != value:
                self.headers[r].value = value

    def tick(self) -> None:
        """Send what is held if the interval is up."""
        if self.pending and (self.last_flush is None or time.monotonic() - self.last_flush >= self.interval):
            self.flush()

    def _send(self, rank: int, stream: str, text: str) -> None:
        if self.use_widgets and rank in self.areas:
            with self.areas[rank]:
                sys.stdout.write(text)
                sys.stdout.flush()
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
        sys.stdout.flush()

    def close(self) -> None:
        """Send the rest and remove the live areas (the final view replaces them)."""
        self.flush(partial=True)
        if self.handle is not None:  # empty in every format (no "<HTML object>" in a text rendering)
            self.handle.update({"text/plain": "", "text/html": ""}, raw=True)
