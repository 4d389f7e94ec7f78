"""The package's one logger, "joulepipe", and the default place its lines go.

Every module logs through ``logger`` (errors ignored on purpose at debug,
the product's lines at INFO). ``default_log()`` is the line sink the
integrations (``joulepipe.pytorch``, ``joulepipe.megatron``) use when the
caller passes none: INFO lines on the logger. When the program configured
no logging handler at all, a handler of its own writes them to stderr (one
write per line, so ranks sharing a pipe do not interleave inside a line);
with any configuration, they follow it.
"""

from __future__ import annotations

import logging
from typing import Callable

logger = logging.getLogger("joulepipe")


def default_log() -> Callable[[str], None]:
    if not logging.getLogger().handlers and not logger.handlers:
        handler = logging.StreamHandler()  # stderr; emit() writes the line and its newline at once
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger.info
