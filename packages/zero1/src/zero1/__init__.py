"""trainsys-zero1."""

from zero1.__about__ import __version__

__all__ = ["__version__"]
