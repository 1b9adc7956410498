"""What the notebook concludes from the ranks' records: layout findings in compiled HLO,
jit-vs-eager comparisons, ranks grouped by equal output, the collectives' timeline. Pure."""
