"""What the tests share, imported as ``support.NAME`` (tests/ is on the path): the IPython test
shell, views read back as HTML, waiting for a cluster's state, the topologies a test can run under
(this host, another host's stand-in, a Slurm job step), a real Slurm on this machine, reruns of
test files in a subprocess, and ``require`` for what a test needs from the machine.
"""
