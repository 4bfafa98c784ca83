"""tensorwire's Python side: annotations for jobs run under `tensorwire capture`."""
