"""trainsys-benchkit."""

from benchkit.__about__ import __version__

__all__ = ["__version__"]
