"""How the hints of ``--compare`` are said: each hint is the facts of one likely cause of a
jit/eager difference (mpinb.engine.traces.hints, mpinb.engine.passes.multi_process_hints),
worded here. Pure: no IPython.
"""

from __future__ import annotations


def value_words(shown: dict) -> str:
    """A global's value as mpinb.engine.traces.shown describes it: '2.0', 'a float64[3] array', 'a dict'."""
    if "repr" in shown:
        return shown["repr"]
    if "dtype" in shown:
        return f"a {shown['dtype']}{shown['shape']} array"
    return f"a {shown['type']}"


def stale_words(stale: dict) -> str:
    """'traced when k was 2; it is 5 now' (a global that was no scalar: 'was another value')."""
    was = stale["was"] if stale["was"] is not None else "another value"
    return f"traced when {stale['global']} was {was}; it is {value_words(stale['now'])} now"


def stale_global_hint(hint: dict) -> str:
    name = hint["function"]
    return (f"{name} was {stale_words(hint)}: a jitted function keeps the globals it was traced with "
            f"(pass {hint['global']} as an argument, or define {name} again)")


def assigns_global_hint(hint: dict) -> str:
    name = hint["function"]
    return (f"{name} assigns the global {hint['global']}, which happens only when {name} is traced, "
            "not at each call (return the value instead)")


def prints_hint(hint: dict) -> str:
    name = hint["function"]
    return f"{name} calls print, which runs only when {name} is traced (jax.debug.print prints at each call)"


def multihost_hint(hint: dict) -> str:
    names = hint["names"]
    return (f"{', '.join(names)} {'was' if len(names) == 1 else 'were'} computed from {hint['helper']}, which "
            "under jax.disable_jit (the eager pass) may see only this process's data: that "
            "difference is JAX's eager mode, not jit (the sharded values themselves are "
            "compared block by block)")


#: the words of each cause of a hint
HINT_WORDS = {"stale_global": stale_global_hint, "assigns_global": assigns_global_hint, "prints": prints_hint,
              "multihost": multihost_hint}


def hint_words(hint: dict) -> str:
    """One hint of a rank's record in words."""
    return HINT_WORDS[hint["cause"]](hint)
