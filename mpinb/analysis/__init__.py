"""A library of pure functions over what crossed the wire, used by every side that needs a
conclusion: layout findings in compiled HLO (the engine reads its own HLO with them), the
deadlock proof and the divergence of what ranks ran (the cells, while and after a cell runs),
the ranks' accounts of themselves compared (the cluster's start), jit-vs-eager comparisons,
ranks grouped by equal output and the collectives' timeline (the view). It imports no IPython,
no widgets and nothing of mpinb but the op table, so it tests without a kernel. It returns facts
(dataclass fields, causes, numbers), never a sentence: mpinb.view words them (hlo_words,
deadlock_words, compare_words, start_words, timeline_words, log_words, divergence_words), and
the callers that show them take the words from there; tests/test_one_voice.py keeps it so."""
