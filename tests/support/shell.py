"""IPython's process-wide test shell, shared by the magic tests."""


def ipython_shell():
    """IPython's process-wide test shell (start_ipython() returns it only on its first call)."""
    from IPython.testing import globalipapp

    return globalipapp.start_ipython() or globalipapp.get_ipython()
