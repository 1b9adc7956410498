"""A cluster's life, on the notebook's side: its options, its start (the controller, the MPI
job, the engines' checks of themselves and their setup, with a progress bar), the files that
name it, the watchdog that ends it when its holder is gone, attaching to it, and its end.
``MPICluster`` (mpi_cluster.py) is the door: it runs cells through mpinb.cells and sends
whatever runs on an engine through its one method, ``on_engines``.

Its errors carry facts; mpi_cluster.py gives them their words (mpinb.view.error_words), so that
``str(error)`` is a sentence wherever a cluster is used, while the watchdog, which says nothing to
a user, loads none of the view."""
