"""How long the sentences of a Markdown page are: its prose only (code blocks, directives,
tables, headings, HTML comments and link targets left out). ipyparallel's documentation averages
14.5 words a sentence, no page above 18.2, its longest sentences about 40 words; mpinb's pages
are held to that (tests/test_docs_sources.py).

    python tests/support/prose.py docs/PAGE.md ...     # mean and longest sentence of each page
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FENCE = re.compile(r"^(```+|~~~+)")
#: a sentence ends at . ! ? or : followed by a space and a capital, or at the end of a paragraph
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'*])")


def prose_paragraphs(text: str) -> list[str]:
    """The page's paragraphs and list items of plain prose, each as one line."""
    out, fence, current = [], None, []

    def close():
        if current:
            out.append(" ".join(current))
            current.clear()

    for line in re.sub(r"<!--.*?-->", "", text, flags=re.S).splitlines():
        stripped = line.strip()
        m = FENCE.match(stripped)
        if fence is None and m:
            close()
            fence = m.group(1)
            continue
        if fence is not None:
            if stripped == fence:
                fence = None
            continue
        if not stripped or stripped.startswith(("#", "|", "<", "$")) or re.match(r"^:\w*:", stripped):
            close()  # a heading, a table, HTML, a directive's option (":maxdepth: 1")
            continue
        if re.match(r"^([-*+:]|\d+\.)\s", stripped):  # a list item or a definition: a paragraph of its own
            close()
            stripped = re.sub(r"^([-*+:]|\d+\.)\s+", "", stripped)
        current.append(stripped)
    close()
    return out


def words(sentence: str) -> int:
    """Words of a sentence: inline code counts as one word, a link as its text."""
    sentence = re.sub(r"`[^`]*`", "CODE", sentence)
    sentence = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", sentence)
    return len(re.findall(r"[\w⟨⟩%@$-]+", sentence))


def sentences(text: str) -> list[int]:
    """The word count of each sentence of the page's prose."""
    counts = []
    for paragraph in prose_paragraphs(text):
        for sentence in SENTENCE_END.split(paragraph):
            n = words(sentence)
            if n:
                counts.append(n)
    return counts


def stats(text: str) -> tuple[float, int, int]:
    """(mean words per sentence, longest sentence, sentences)."""
    counts = sentences(text)
    return (sum(counts) / len(counts) if counts else 0.0, max(counts, default=0), len(counts))


def main(paths: list[str]) -> int:
    for path in paths:
        mean, longest, n = stats(Path(path).read_text())
        print(f"{path}: {n} sentences, {mean:.1f} words on average, the longest {longest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
