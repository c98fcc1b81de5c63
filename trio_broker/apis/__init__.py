"""One handler per Kafka API, registered by key in ``registry``."""

from __future__ import annotations

import importlib
import logging

LOGGER = logging.getLogger(__name__)

#: Handler modules; each registers its APIs on import. Optional ones may be absent while built.
_MODULES = ("api_versions", "metadata", "produce", "fetch", "list_offsets", "admin",
            "groups", "offsets", "init_producer_id", "sasl")


def load_handlers() -> None:
    """Import every handler module that exists (idempotent)."""
    for name in _MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
