"""The progress bar of a cluster's start (client side)."""

from __future__ import annotations

import time

from ..view.start_words import TEXT_BAR_FORMAT, phase_words, progress_html, progress_text


class StartProgress:
    """The progress bar of a cluster's start: one bar from the moment start() is called until the
    engines are ready, counting the engines as they register and naming the phase, so that its
    clock and the "ready in" message agree. In a notebook it is a display that is updated in place
    (HTML and text, no widget: a saved notebook shows the last state after a kernel restart, on
    GitHub or in nbconvert alike); elsewhere tqdm's text bar."""

    def __init__(self, n: int, show: bool, interval: float = 0.2):
        self.n, self.registered, self.at = n, 0, "controller"
        self.t0, self.interval, self.last = time.perf_counter(), interval, 0.0
        self.bar = self.handle = None
        if not show:
            return
        from ..view.cell_view import in_notebook

        if in_notebook():  # a notebook front end
            from IPython.display import display

            self.handle = display(self._bundle(), raw=True, display_id=True)
        else:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=n, desc=phase_words(self.at), unit="engine", bar_format=TEXT_BAR_FORMAT)

    def _bundle(self) -> dict:
        facts = (self.at, self.registered, self.n, time.perf_counter() - self.t0)
        return {"text/plain": progress_text(*facts), "text/html": progress_html(*facts)}

    def _show(self, force: bool = False) -> None:
        now = time.perf_counter()
        if self.handle is not None and (force or now - self.last >= self.interval):
            self.handle.update(self._bundle(), raw=True)
            self.last = now

    def phase(self, at: str) -> None:
        """The start is now at phase ``at`` (mpinb.view.start_words.START_PHASES)."""
        self.at = at
        if self.bar is not None:
            self.bar.set_description_str(phase_words(at))
        self._show(force=True)

    def count(self, registered: int) -> None:
        if registered != self.registered:
            if self.bar is not None:
                self.bar.update(registered - self.registered)
            self.registered = registered
        self._show()

    def close(self, keep: bool = True) -> None:
        """The bar's last state stays shown, or with ``keep=False`` it is taken away (a display
        updated to nothing; tqdm's line erased)."""
        if self.bar is not None:
            self.bar.leave = keep
            self.bar.close()
        if keep:
            self._show(force=True)
        elif self.handle is not None:
            self.handle.update({}, raw=True)
