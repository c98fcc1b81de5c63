"""``python -m trio_broker`` is ``trio-broker``."""

from .cli import main

raise SystemExit(main())
