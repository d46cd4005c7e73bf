"""Named instants of the broker's crash-safe operations (a move's swap, a clean's swap, a
transaction's commit) where a crash test may stop the broker.

Test-only, read once at startup: MINIKAFKA_TEST_EXIT_AT=<point> makes the process exit at once
(no cleanup, as kill -9 would) when it reaches that point; MINIKAFKA_TEST_PAUSE_AT=<point>
freezes the thread that reaches it (the event loop, or a cleaner thread) for a test to kill it.
"""

from __future__ import annotations

import logging
import os
import time

logger = logging.getLogger(__name__)

_EXIT_AT = os.environ.get("MINIKAFKA_TEST_EXIT_AT", "")
_PAUSE_AT = os.environ.get("MINIKAFKA_TEST_PAUSE_AT", "")
TEST_EXIT_STATUS = 86


def hook_point(point: str) -> None:
    """A named instant where a crash test may stop the process (see above)."""
    if point == _EXIT_AT:
        logger.warning("test hook: exiting at %s", point)
        logging.shutdown()
        os._exit(TEST_EXIT_STATUS)
    if point == _PAUSE_AT:
        logger.warning("test hook: paused at %s", point)
        for handler in logging.getLogger().handlers:
            handler.flush()
        while True:
            time.sleep(3600)
