"""pflkit: the thin kit behind the PFL reproduction book."""

__version__ = "0.1.0"
