"""The workshop notebooks, shipped as this package's data (``*.ipynb``); ``mpinb tutorials``
(mpinb/workshop.py) copies them out. Their jupytext twins, for readable diffs, are the
repository's ``notebooks/*.py``."""

#: where ``mpinb tutorials`` writes when no folder is given (also where the views' links to a
#: tutorial look for it: mpinb/view/links.py)
DEFAULT_DIR = "mpinb-tutorials"
