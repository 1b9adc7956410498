"""Ranks with the same thing to say, said once: the ``dshbak -c`` of the per-rank view.

    >>> rank_ranges([0, 1, 2, 5, 7, 8])
    '0-2,5,7-8'
    >>> group_by({0: "a", 1: "b", 2: "a"})
    [([0, 2], 'a'), ([1], 'b')]

Pure: no IPython, no widgets.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping

#: what stands for each rank's own number (or host name) in text that differs only by it
RANK_MARK, HOST_MARK = "\u27e8rank\u27e9", "\u27e8host\u27e9"
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")

#: The shapes of a log line's header, whatever library wrote it (one rule per shape, not per
#: library): ``src`` names who logged, ``msg`` is what was said. The header's other parts (time,
#: thread, process) differ between ranks and runs, and are dropped when the line is folded.
LOG_HEADERS = (
    # glog / absl, as XLA, TSL, gRPC and Gloo's C++ write it: "I1205 10:39:06.123456  4242 file.cc:77] ..."
    re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+(?P<src>[\w./+-]+):\d+\]\s?(?P<msg>.*)$"),
    # Python's logging in its default format: "WARNING:absl:...", "INFO:orbax.checkpoint:..."
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):(?P<src>[\w.]+):(?P<msg>.*)$"),
    # a component's name in brackets, a capital and letters only: "[Gloo] Rank 0 is connected ..."
    re.compile(r"^\[(?P<src>[A-Z][A-Za-z]+)\] (?P<msg>.*)$"),
)


def rank_ranges(ranks: Iterable[int], sep: str = ",") -> str:
    """Sorted ranks as ranges: [0, 1, 2, 5] -> '0-2,5'."""
    ranks = sorted(set(ranks))
    parts, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            parts.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return sep.join(parts)


def group_by(values: Mapping[int, Hashable]) -> list[tuple[list[int], Hashable]]:
    """Ranks grouped by equal value, groups in the order of their first rank."""
    groups: dict[Hashable, list[int]] = {}
    for rank in sorted(values):
        groups.setdefault(values[rank], []).append(rank)
    return sorted(((ranks, value) for value, ranks in groups.items()), key=lambda item: item[0][0])


def merge_sections(per_rank: Mapping[int, list[tuple]]) -> list[tuple[list[int], list[str]]]:
    """{rank: [(section name, lines[, key]), ...]} -> [(ranks, lines)]: each section grouped by
    equal content (its ``key`` where given: what the lines show may be equal when what they stand
    for, a picture, is not), then the sections of one rank set joined in their order. The rank
    sets are ordered by size (all ranks first), then by first rank; empty sections are left out."""
    named: dict[int, dict[str, tuple]] = {r: {} for r in per_rank}
    for r, sections in per_rank.items():
        for section in sections:  # a name given twice: its first section counts
            named[r].setdefault(section[0], section)
    order = list(dict.fromkeys(name for sections in named.values() for name in sections))
    by_set: dict[tuple[int, ...], list[str]] = {}
    for name in order:
        content = {}
        for r, sections in named.items():
            found = sections.get(name, (name, ()))
            lines = found[1]
            content[r] = (found[2] if len(found) > 2 else lines, lines)
        for ranks, (_, lines) in group_by(content):
            if lines:
                by_set.setdefault(tuple(ranks), []).extend(lines)
    return sorted(((list(ranks), lines) for ranks, lines in by_set.items()), key=lambda g: (-len(g[0]), g[0][0]))


def _tokens(text: str) -> list[str]:
    """The text cut around whole numbers: ['Rank ', '0', ' is connected to ', '1', ...]."""
    return _NUMBER.split(text)


def rank_template(texts: Mapping[int, str], hosts: Mapping[int, str] | None = None) -> str | None:
    """The text all ``texts`` (rank -> text) share but for each rank's own number (a whole
    number equal to the rank, at the same place in every text) and host name, with those
    places marked; None when they differ otherwise. '[Gloo] Rank 0 is connected to 1 peer'
    and '[Gloo] Rank 1 is connected to 1 peer' -> '[Gloo] Rank ⟨rank⟩ is connected to 1 peer'."""
    ranks = sorted(texts)
    if len(ranks) < 2:
        return None
    hosts = hosts or {}
    own = {}
    for r in ranks:
        text = texts[r]
        host = hosts.get(r)
        if host and len({hosts.get(q) for q in ranks}) > 1:
            text = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", HOST_MARK, text)
        own[r] = _tokens(text)
    first = own[ranks[0]]
    if any(len(own[r]) != len(first) for r in ranks):
        return None
    out = []
    for i, token in enumerate(first):
        column = {r: own[r][i] for r in ranks}
        if len(set(column.values())) == 1:
            out.append(token)
        elif i % 2 == 1 and all(column[r] == str(r) for r in ranks):  # a number: each rank's own
            out.append(RANK_MARK)
        else:
            return None
    return "".join(out)


def _log_source(src: str) -> str:
    """Who logged, in a word: a source file's project ('external/xla/xla/pjrt/client.cc' ->
    'xla'), a logger's root ('orbax.checkpoint' -> 'orbax'), or the tag ('Gloo')."""
    if "/" in src:
        parts = [p for p in src.split("/")[:-1] if p not in ("", ".", "external")]
        return parts[0] if parts else src.rsplit("/", 1)[-1]
    return src.split(".")[0] if "." in src and not src.endswith((".cc", ".h", ".cpp")) else src


def log_line(line: str) -> tuple[str, str] | None:
    """(source, message) of a line a library logged, None for anything else."""
    for shape in LOG_HEADERS:
        found = shape.match(line)
        if found:
            return _log_source(found["src"]), found["msg"]
    return None


def log_runs(text: str) -> list[str | list[tuple[str, str]]]:
    """The lines of ``text``, each run of log lines (see LOG_HEADERS) gathered as one item: a
    list of (source, message), without the time and thread that differ between ranks
    (mpinb.view.log_words folds each run into one line)."""
    out: list = []
    for line in text.splitlines():
        found = log_line(line)
        if found is None:
            out.append(line)
        elif out and isinstance(out[-1], list):
            out[-1].append(found)
        else:
            out.append([found])
    return out


def fold_rank_numbers(texts: Mapping[int, str], hosts: Mapping[int, str] | None = None) -> dict[int, str]:
    """Each rank's text, or, where it differs from others' only by the rank's own number (or host
    name), the template they share, each rank's number shown as the ranks that share it
    ('hello from rank ⟨0-3⟩ of 4'): ranks whose output says the same thing group together."""
    shown = dict(texts)
    left = [r for r in sorted(texts) if texts[r]]
    while left:
        first, rest = left[0], left[1:]
        members = [first] + [r for r in rest if rank_template({first: texts[first], r: texts[r]}, hosts) is not None
                             or texts[r] == texts[first]]
        if len(members) > 1 and len({texts[r] for r in members}) > 1:
            template = rank_template({r: texts[r] for r in members}, hosts)
            if template is not None:  # each rank's own number shown as the values it takes: ⟨0-3⟩
                own = f"\u27e8{rank_ranges(members)}\u27e9"
                for r in members:
                    shown[r] = template.replace(RANK_MARK, own)
        left = [r for r in left if r not in members]
    return shown
