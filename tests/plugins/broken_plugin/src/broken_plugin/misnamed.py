"""An adapter whose class name differs from its entry-point key."""

from harness.adapters.none import NoneAdapter


class Misnamed(NoneAdapter):
    name = "something_else"
