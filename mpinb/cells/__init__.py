"""Running cells on a started cluster, on the notebook's side: a cell's run on its ranks (each
rank's task, the status while it runs, the deadlock proof, the grace after a failure), the
engines' health, freeing ranks where they wait, pulling a variable of every rank, and the
result. It takes the cluster as given and imports nothing of mpinb.cluster.

Its errors carry facts; cell_run.py gives them their words (mpinb.view.error_words)."""
