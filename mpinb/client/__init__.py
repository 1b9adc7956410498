"""The notebook's side of a cluster: its lifecycle, the engines' health, running a cell on its
ranks and the result."""
