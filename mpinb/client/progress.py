"""The progress bar of a cluster's start (client side)."""

from __future__ import annotations


class StartProgress:
    """The progress bar of a cluster's start (tqdm: a widget in a notebook, text elsewhere): one
    bar from the moment start() is called until the engines are ready, counting the engines as
    they register and naming the phase, so that its clock and the "ready in" message agree."""

    def __init__(self, n: int, show: bool):
        self.bar = None
        if show:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=n, desc="starting the controller", unit="engine",
                            bar_format="{desc}: {n_fmt}/{total_fmt} engines {bar} {elapsed_s:.1f} s")

    def phase(self, words: str) -> None:
        if self.bar is not None:
            self.bar.set_description_str(words)

    def count(self, registered: int) -> None:
        if self.bar is not None and registered != self.bar.n:
            self.bar.update(registered - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
