"""Reading a rendered view as a person would see it: the HTML inside a widget tree."""


def widget_html(widget) -> str:
    """Every HTML string inside a widget tree (what the browser draws), in order."""
    own = getattr(widget, "value", "") if widget.__class__.__name__ == "HTML" else ""
    return own + "".join(widget_html(c) for c in getattr(widget, "children", ()))
