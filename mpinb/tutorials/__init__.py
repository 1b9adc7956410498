"""The workshop notebooks, shipped as this package's data (``*.ipynb``); ``mpinb tutorials``
(mpinb/workshop.py) copies them out. Their jupytext twins, for readable diffs, are the
repository's ``notebooks/*.py``."""
