"""Per-rank view of a cell's result: ipywidgets where the front end has them, with the same
content always present as text/plain and text/html, so nbconvert, terminals and tests can read it.

Grouped by default, as ``dshbak -c`` groups pdsh output: what several ranks printed or computed
identically is shown once under ``[ranks 0-3]``, only what differs per rank; the ranks' states
on one line (a grid from 16 ranks on); each layout finding once, with the ranks it was found on,
its severity and what to do. ``result.by_rank = True`` (``--by-rank``) shows every rank in full.
Each stream shows at most ``result.max_lines`` lines per rank (head and tail).

``render_text(result)`` and ``render_html(result)`` are pure; widgets are imported lazily.
"""

from __future__ import annotations

import html
import sys
import time

from . import hlo, images, timeline
from .grouping import label, merge_sections
from .values import describe

RANKS_PER_PAGE = 8
GRID_FROM = 16  # ranks: from here on the states are a grid of cells
STATE_COLORS = {"finished": "#2e7d32", "failed": "#c62828", "running": "#ef6c00", "dead": "#6a1b9a"}
SEVERITY_COLORS = {"error": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}


# ------------------------------------------------------------------------------ text

def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def _value_lines(label: str, summary: dict) -> list[str]:
    if summary.get("kind") == "tree":
        lines = [f"{label}: pytree"]
        lines += [f"  {label}{path}: {describe(s)}" for path, s in summary["leaves"]]
        if summary.get("more"):
            lines.append(f"  ... {summary['more']} more leaves")
        return lines
    return [f"{label}: {describe(summary)}"]


def trim(text: str, max_lines: int | None) -> str:
    """At most ``max_lines`` lines: the head and the tail, and how many are hidden between."""
    lines = text.rstrip("\n").splitlines()
    if not max_lines or len(lines) <= max_lines:
        return text
    head = max(1, (max_lines + 1) // 2)
    tail = max_lines - head
    hidden = len(lines) - head - tail
    note = f"... {hidden:,} line{'s' if hidden != 1 else ''} hidden (all: result.stdout[rank], or --max-lines 0)"
    return "\n".join([*lines[:head], note, *(lines[-tail:] if tail else [])])


def state_detail(result, rank: int) -> list[str]:
    """Why a rank did not finish: what it is blocked in, how it died (and its fault report)."""
    state = result.states.get(rank, "?")
    if state == "running":
        from .cell import describe_inflight

        return [f"state: still running, {describe_inflight(result.inflight.get(rank))}"]
    if state == "dead":
        lines = [f"state: dead, {result.dead.get(rank, 'process ended')}"]
        fault = result.faults.get(rank, "").strip()
        return lines + (["fault report:", _indent(fault)] if fault else [])
    return []


def rank_sections(result, rank: int, scales=None) -> list[tuple[str, tuple[str, ...]]]:
    """What one rank has to say, as named sections (state and time left out): the units that
    the grouped view compares across ranks. ``scales``: the pictures' shared colour scales
    (images.scales), computed once per view rather than once per rank."""
    rec = result.records.get(rank)
    out, err = result.stdout.get(rank, ""), result.stderr.get(rank, "")
    sections = [("detail", state_detail(result, rank)),
                ("stdout", ["stdout:", _indent(trim(out, result.max_lines))] if out else []),
                ("stderr", ["stderr:", _indent(trim(err, result.max_lines))] if err else [])]
    if rec:
        # one section per value and per comparison: what several ranks share is shown once even
        # when another value differs
        if rec.result is not None:
            sections.append(("value Out", _value_lines("Out", rec.result)))
        sections += [(f"value {name}", _value_lines(name, summary)) for name, summary in rec.show.items()]
        sections += [("error", [f"error: {rec.error}", _indent(rec.error.traceback)] if rec.error else []),
                     ("eager", [f"eager run failed: {rec.eager_error}"] if rec.eager_error else [])]
        sections += [(f"compare {c.name}", [f"compare: {c}"]) for c in rec.comparisons]
        sections.append(("hints", [f"hint: {h}" for h in rec.hints]))
        sections.append(("pictures", images.lines(result, rank, scales), images.key(result, rank)))
    return [(name, tuple(line for line in lines if line), *key) for name, lines, *key in sections]


def finding_text(w, ranks, link: bool = True, brief: bool | None = None, count: int = 1) -> str:
    """One layout finding in plain words, with the ranks it was found on; a small info finding
    in one line (``brief``, by default for those: ``w.small``), ``count`` times."""
    who = "across ranks" if ranks == [None] else label(r for r in ranks if r is not None)
    brief = w.small if brief is None else brief
    times = f" ({count} copies)" if count > 1 else ""
    return f"{w.severity} [{w.kind}] {who}: {w.brief() + times if brief else w.plain(link=link)}"


def findings(result, by_rank: bool = False) -> list[tuple]:
    """(finding, its ranks, how many) of each distinct layout finding, errors first (with
    ``by_rank``: only those found across ranks, the others are in the ranks' columns); small
    findings that read the same in one line are counted instead of repeated."""
    out: list[list] = []
    one_line: dict[tuple, list] = {}  # small findings said in the same words: said once, counted
    for w, ranks in hlo.distinct(result.warnings):
        if by_rank and ranks != [None]:
            continue
        if w.small:
            key = (w.kind, w.brief(), tuple(ranks))
            if key in one_line:
                one_line[key][2] += 1
                continue
            one_line[key] = [w, ranks, 1]
            out.append(one_line[key])
        else:
            out.append([w, ranks, 1])
    return [tuple(item) for item in out]


def state_line(result) -> str:
    """'finished: ranks 0-3 (0.010-0.012 s); failed: rank 1': the states, grouped."""
    parts = []
    for state in ("finished", "failed", "running", "dead"):
        ranks = [r for r in result.ranks if result.states.get(r) == state]
        if not ranks:
            continue
        times = [result.records[r].elapsed for r in ranks if result.records.get(r)]
        span = ""
        if times:
            lo, hi = min(times), max(times)
            span = f" ({lo:.3f} s)" if f"{lo:.3f}" == f"{hi:.3f}" else f" ({lo:.3f}-{hi:.3f} s)"
        parts.append(f"{state}: {label(ranks)}{span}")
    return "; ".join(parts)


def groups(result, scales=None) -> list[tuple[list[int], list[str]]]:
    """[(ranks, lines)]: every rank's sections, identical ones merged across ranks."""
    scales = images.scales(result) if scales is None else scales
    return merge_sections({r: rank_sections(result, r, scales) for r in result.ranks})


def rank_block(result, rank: int, scales=None) -> list[str]:
    """The text lines describing one rank in full (the --by-rank view, without the header)."""
    rec = result.records.get(rank)
    state = result.states.get(rank, "?")
    lines = [f"state: {state} in {rec.elapsed:.3f} s"] if rec else ([] if state_detail(result, rank)
                                                                      else [f"state: {state}"])
    for _, section, *_ in rank_sections(result, rank, scales):
        lines += section
    said = [finding_text(w, [rank]) for w, ranks in hlo.distinct(result.warnings) if rank in ranks]
    return lines + [text if said.count(text) == 1 else f"{text} ({said.count(text)} copies)"
                    for text in dict.fromkeys(said)]


def render_text(result) -> str:
    lines = [result.summary()]
    for note in result.notes:
        lines.append(f"note: {note}")
    when = timeline.summary(result)
    scales = images.scales(result)
    if result.by_rank:
        for rank in result.ranks:
            lines.append(f"[rank {rank}]")
            lines += [_indent(line, "  ") for line in rank_block(result, rank, scales)]
        shared = [finding_text(w, ranks, count=n) for w, ranks, n in findings(result, by_rank=True)]
        if shared:
            lines.append("[all ranks]")
            lines += [_indent(text, "  ") for text in shared]
        if when:
            lines.append(when)
        return "\n".join(lines)
    lines.append(state_line(result))
    if when:
        lines.append(when)
    for ranks, body in groups(result, scales):
        lines.append(f"[{label(ranks)}]")
        lines += [_indent(line, "  ") for line in body]
    lines += [finding_text(w, ranks, count=n) for w, ranks, n in findings(result)]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ html

_STYLE = ("font-family:monospace;font-size:12px;white-space:pre-wrap;word-break:normal;overflow-wrap:normal;margin:0;"
          "max-height:24em;overflow:auto")


def _card(title: str, color: str, body_lines: list[str], extra: str = "", rank: str = "") -> str:
    data = f" data-rank='{rank}'" if rank else ""
    body = html.escape("\n".join(body_lines))
    return (f"<div class='mpinb-rank'{data} style='flex:1;min-width:18em;border:1px solid #ccc;"
            f"padding:4px;margin:2px'><div style='font-weight:bold;color:{color}'>{html.escape(title)}</div>"
            f"<pre style='{_STYLE}'>{body}</pre>{extra}</div>")


def rank_html(result, rank: int, scales=None) -> str:
    """One rank in full (the --by-rank view)."""
    state = result.states.get(rank, "?")
    scales = images.scales(result) if scales is None else scales
    return _card(f"rank {rank} ({state})", STATE_COLORS.get(state, "#555"), rank_block(result, rank, scales),
                 images.tags(result, rank, scales), str(rank))


def group_html(result, ranks: list[int], lines: list[str], scales=None) -> str:
    """A group of ranks with the same output, and the pictures of its first rank when the group
    holds the pictures' lines (equal lines: equal pictures, see images.lines)."""
    states = {result.states.get(r, "?") for r in ranks}
    color = STATE_COLORS.get(states.pop(), "#555") if len(states) == 1 else "#555"
    scales = images.scales(result) if scales is None else scales
    own = images.lines(result, ranks[0], scales)
    pictures = images.tags(result, ranks[0], scales) if own and set(own) <= set(lines) else ""
    return _card(label(ranks), color, lines, pictures, ",".join(map(str, ranks)))


def state_grid_html(result) -> str:
    """The ranks' states: one line, or from GRID_FROM ranks on a grid of small cells (time on hover)."""
    if len(result.ranks) < GRID_FROM:
        return f"<div class='mpinb-states'>{html.escape(state_line(result))}</div>"
    cells = []
    for r in result.ranks:
        state = result.states.get(r, "?")
        rec = result.records.get(r)
        tip = f"rank {r}: {state}" + (f" in {rec.elapsed:.3f} s" if rec else "")
        cells.append(f"<span title='{html.escape(tip)}' style='display:inline-block;width:2.6em;margin:1px;"
                     f"text-align:center;color:white;background:{STATE_COLORS.get(state, '#555')}'>{r}</span>")
    return (f"<div class='mpinb-states' data-grid='1'>{''.join(cells)}</div>"
            f"<div style='font-size:11px'>{html.escape(state_line(result))}</div>")


def header_html(result) -> str:
    """The summary line and every note (restart advice, lost job, HLO capture): shown above the
    ranks by both the HTML view and the widget, as the text view shows them."""
    head = f"<div class='mpinb-summary' style='font-weight:bold'>{html.escape(result.summary())}</div>"
    notes = "".join(f"<div class='mpinb-note' style='color:#c62828'>note: {html.escape(n)}</div>"
                    for n in result.notes)
    return head + notes + ("" if result.by_rank else state_grid_html(result))


def _finding_html(w, ranks, count: int = 1) -> str:
    link = hlo.KINDS[w.kind].link
    anchor = f" See <a href='{html.escape(link)}' target='_blank'>{html.escape(link)}</a>" if link else ""
    style = f"color:{SEVERITY_COLORS[w.severity]}"
    full = html.escape(finding_text(w, ranks, link=False, brief=False))
    if w.small:  # one line; the whole finding one click away
        return (f"<details class='mpinb-finding' data-severity='{w.severity}' style='{style}'><summary>"
                f"{html.escape(finding_text(w, ranks, count=count))}</summary>{full}{anchor}</details>")
    return f"<div class='mpinb-finding' data-severity='{w.severity}' style='{style}'>{full}{anchor}</div>"


def timeline_html(result) -> str:
    """The collectives' timeline: the picture, with its one-line summary."""
    picture = timeline.svg(result)
    if not picture:
        return ""
    return (f"<div class='mpinb-timeline-block'><div>{html.escape(timeline.summary(result))}</div>"
            f"{picture}</div>")


def footer_html(result) -> str:
    """The layout findings, each once (in the --by-rank view: those found across ranks), and
    the timeline of the cell's collectives."""
    items = findings(result, by_rank=result.by_rank)
    return "".join(_finding_html(w, ranks, n) for w, ranks, n in items) + timeline_html(result)


def body_html(result) -> str:
    scales = images.scales(result)
    if result.by_rank:
        return "".join(rank_html(result, r, scales) for r in result.ranks)
    return "".join(group_html(result, ranks, lines, scales) for ranks, lines in groups(result, scales))


def render_html(result) -> str:
    return (f"<div class='mpinb-view'>{header_html(result)}<div style='display:flex;flex-wrap:wrap'>"
            f"{body_html(result)}</div>{footer_html(result)}</div>")


# ------------------------------------------------------------------------------ widgets

def widgets_available() -> bool:
    """True inside a Jupyter kernel with ipywidgets importable."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    shell = ip.get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def build_widget(result):
    """ipywidgets view: summary on top, then the groups of ranks (or, --by-rank, one column per
    rank in pages of 8 ranks), then the layout findings."""
    import ipywidgets as w

    footer = footer_html(result)
    if not result.by_rank:
        parts = [w.HTML(header_html(result)),
                 w.HTML(f"<div style='display:flex;flex-wrap:wrap'>{body_html(result)}</div>")]
        if footer:
            parts.append(w.HTML(footer))
        return w.VBox(parts, layout=w.Layout(width="100%"))
    scales = images.scales(result)

    def column(rank):
        return w.HTML(rank_html(result, rank, scales), layout=w.Layout(flex="1 1 0", min_width="14em"))

    pages = [result.ranks[i:i + RANKS_PER_PAGE] for i in range(0, len(result.ranks), RANKS_PER_PAGE)]
    boxes = [w.HBox([column(r) for r in page], layout=w.Layout(flex_flow="row wrap")) for page in pages]
    if len(boxes) == 1:
        body = boxes[0]
    else:
        body = w.Tab(children=boxes)
        for i, page in enumerate(pages):
            body.set_title(i, f"ranks {page[0]}-{page[-1]}")
    parts = [w.HTML(header_html(result)), body]
    if footer:
        parts.append(w.HTML(footer))
    return w.VBox(parts, layout=w.Layout(width="100%"))


def mimebundle(result) -> dict:
    bundle = {"text/plain": render_text(result), "text/html": render_html(result)}
    if widgets_available():
        try:
            widget_bundle = build_widget(result)._repr_mimebundle_()
        except Exception:  # noqa: BLE001 - widgets are an enhancement; text and html remain
            widget_bundle = None
        if widget_bundle:
            bundle.update({k: v for k, v in widget_bundle.items() if k != "text/plain"})
    return bundle


def live_words(state: str, seconds: float, inflight: dict | None, error_name: str | None) -> str:
    """A rank's state while its cell runs, as its live header says it: 'running 5 s, blocked
    in allreduce (call 2, 12 B, waiting 4.9 s)', 'finished in 0.01 s', 'failed (ValueError)'."""
    if state == "running":
        if inflight:
            from .cell import describe_inflight

            return f"running {seconds:.0f} s, {describe_inflight(inflight)}"
        return f"running {seconds:.0f} s"
    if state == "failed":
        return f"failed ({error_name})" if error_name else "failed"
    return f"{state} in {seconds:.2f} s"


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

    def state(self, rank: int, state: str, seconds: float, inflight: dict | None, error_name: str | None) -> None:
        """Show where ``rank`` is (its header, above its output; widgets only): running for how
        long and in which collective, or finished or failed, updated at most every
        ``state_interval`` seconds."""
        if rank not in self.headers:
            return
        self.states[rank] = (state, live_words(state, seconds, inflight, error_name))
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
