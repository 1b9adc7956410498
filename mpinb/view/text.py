"""The per-rank view as text (``text/plain``: terminals, nbconvert, tests), and the sections it
is made of, which the HTML view shares.

Grouped by default, as ``dshbak -c`` groups pdsh output: what several ranks printed or computed
identically is shown once under ``[ranks 0-3]``, only what differs per rank; the ranks' states
on one line; each layout finding once, with the ranks it was found on, its severity and what to
do. ``ViewOptions(by_rank=True)`` (``--by-rank``) shows every rank in full; each stream shows at
most ``max_lines`` lines per rank (head and tail). Pure: no IPython.
"""

from __future__ import annotations

from ..analysis import hlo
from ..analysis.grouping import fold_rank_numbers, merge_sections
from ..options.cell_options import ViewOptions
from ..wire.values import describe
from . import images
from .blocks import picture
from .compare_words import comparison_line
from .hint_words import hint_words
from .hlo_words import finding_brief
from .log_words import fold_logs
from .note_words import notes_of
from .rank_words import label
from .timeline_words import timeline_summary
from .words import (
    RESULT_NAME,
    death_words,
    describe_inflight,
    finding_text,
    freed_words_of,
    restarted_words,
    skipped_by,
    state_line,
    summary_line,
    trim,
)

DEFAULT_VIEW = ViewOptions()


class Folded(str):
    """Lines that the HTML view folds behind a word (``summary``: a traceback); text shows them."""

    summary = "traceback"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip("\n").splitlines())


def error_lines(error) -> list[str]:
    """A rank's error said once: 'error: ValueError: bad', then its traceback (folded in HTML)
    without its last lines, which say the same error."""
    said = f"{error}".splitlines()
    frames = error.traceback.rstrip("\n").splitlines()
    if said and [line.strip() for line in frames[-len(said):]] == [line.strip() for line in said]:
        frames = frames[:-len(said)]
        while frames and not frames[-1].strip():
            frames.pop()
    return [f"error: {error}", Folded(_indent("\n".join(frames)))] if frames else [f"error: {error}"]


def _value_lines(label: str, summary: dict) -> list[str]:
    if summary.get("kind") == "tree":
        lines = [f"{label}: pytree"]
        lines += [f"  {label}{path}: {describe(s)}" for path, s in summary["leaves"]]
        if summary.get("more"):
            lines.append(f"  ... {summary['more']} more leaves")
        return lines
    return [f"{label}: {describe(summary)}"]


def state_detail(result, rank: int) -> list[str]:
    """Why a rank did not finish: what it is blocked in, how it died (and its fault report)."""
    state = result.states.get(rank, "?")
    if state == "running":
        where = result.where.get(rank)
        return [f"state: still running, {describe_inflight(result.inflight.get(rank), where)}"
                f"{skipped_by(result, rank)}"]
    if state == "restarted":
        return [f"state: {restarted_words(result.inflight.get(rank), result.where.get(rank))}"]
    if state == "failed" and rank in getattr(result, "freed", {}):
        return [f"state: {freed_words_of(result.freed[rank])}"]
    if state == "dead":
        lines = [f"state: dead, {death_words(result.dead.get(rank, {}))}"]
        fault = result.faults.get(rank, "").strip()
        return lines + (["fault report:", _indent(fault)] if fault else [])
    return []


def rank_sections(result, rank: int, view: ViewOptions = DEFAULT_VIEW, scales=None, outputs=None) -> list[tuple]:
    """What one rank has to say, as named sections (state and time left out): the units that
    the grouped view compares across ranks. ``scales``: the pictures' shared colour scales
    (images.scales), computed once per view rather than once per rank; ``outputs``: the
    (stdout, stderr) texts to show by rank, where they differ from the result's."""
    rec = result.records.get(rank)
    stdout, stderr = outputs or (result.stdout, result.stderr)
    out, err = stdout.get(rank, ""), stderr.get(rank, "")
    sections = [("detail", state_detail(result, rank)),
                ("stdout", ["stdout:", _indent(trim(out, view.max_lines))] if out else []),
                ("stderr", ["stderr:", _indent(trim(err, view.max_lines, "stderr"))] if err else [])]
    if rec:
        # one section per value and per comparison: what several ranks share is shown once even
        # when another value differs
        if rec.result is not None:
            sections.append(("value Out", _value_lines("Out", rec.result)))
        sections += [(f"value {name}", _value_lines(name, summary)) for name, summary in rec.show.items()]
        sections += [(f"blocks {name}", picture(name, summary)) for name, summary in rec.show.items()
                     if summary.get("blocks")]
        sections += [("error", error_lines(rec.error) if rec.error else []),
                     ("eager", [f"eager run failed: {rec.eager_error}"] if rec.eager_error else [])]
        sections += [(f"compare {c.name}", [f"compare: {comparison_line(c)}"]) for c in rec.comparisons]
        sections.append(("hints", [f"hint: {hint_words(h)}" for h in rec.hints]))
        sections.append(("pictures", images.lines(result, rank, scales), images.key(result, rank)))
    return [(name, tuple(line for line in lines if line), *key) for name, lines, *key in sections]


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
            key = (w.kind, finding_brief(w), tuple(ranks))
            if key in one_line:
                one_line[key][2] += 1
                continue
            one_line[key] = [w, ranks, 1]
            out.append(one_line[key])
        else:
            out.append([w, ranks, 1])
    return [tuple(item) for item in out]


def groups(result, view: ViewOptions = DEFAULT_VIEW, scales=None) -> list[tuple[list[int], list[str]]]:
    """[(ranks, lines)]: every rank's sections, identical ones merged across ranks (output that
    differs only by each rank's own number, shown once with the number marked; libraries' log
    lines folded, one line per run)."""
    scales = images.scales(result) if scales is None else scales
    outputs = tuple(fold_rank_numbers({r: fold_logs(text, f"{RESULT_NAME}.{name}[rank]") for r, text in stream.items()})
                    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)))
    return merge_sections({r: rank_sections(result, r, view, scales, outputs) for r in result.ranks})


def rank_block(result, rank: int, view: ViewOptions = DEFAULT_VIEW, scales=None) -> list[str]:
    """The text lines describing one rank in full (the --by-rank view, without the header)."""
    rec = result.records.get(rank)
    state = result.states.get(rank, "?")
    lines = [f"state: {state} in {rec.elapsed:.3f} s"] if rec else ([] if state_detail(result, rank)
                                                                      else [f"state: {state}"])
    for _, section, *_ in rank_sections(result, rank, view, scales):
        lines += section
    said = [finding_text(w, [rank]) for w, ranks in hlo.distinct(result.warnings) if rank in ranks]
    return lines + [text if said.count(text) == 1 else f"{text} ({said.count(text)} copies)"
                    for text in dict.fromkeys(said)]


def render_text(result, view: ViewOptions = DEFAULT_VIEW, grouped=None) -> str:
    """The whole view as text: summary, notes, states, timeline, groups (or ranks), findings.
    ``grouped``: ``groups(result, view)`` where the caller has it already (the HTML view uses
    the same groups)."""
    lines = [summary_line(result, view.max_lines)]
    lines += [f"note: {note}" for note in notes_of(result)]
    when = timeline_summary(result)
    scales = images.scales(result)
    if view.by_rank:
        for rank in result.ranks:
            lines.append(f"[rank {rank}]")
            lines += [_indent(line, "  ") for line in rank_block(result, rank, view, scales)]
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
    for ranks, body in groups(result, view, scales) if grouped is None else grouped:
        lines.append(f"[{label(ranks)}]")
        lines += [_indent(line, "  ") for line in body]
    lines += [finding_text(w, ranks, count=n) for w, ranks, n in findings(result)]
    return "\n".join(lines)
