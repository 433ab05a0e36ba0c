"""``python -m benchkit`` is the ``benchkit`` command."""

from benchkit.cli import main

raise SystemExit(main())
