"""An adapter module that raises on import."""

raise RuntimeError("this plugin is broken on purpose")
