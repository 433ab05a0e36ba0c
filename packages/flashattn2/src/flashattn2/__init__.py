"""trainsys-flashattn2."""

from flashattn2.__about__ import __version__

__all__ = ["__version__"]
