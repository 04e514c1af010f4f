"""Suite-wide setup: quiet, structured logs (warnings and errors still show in failure reports)."""

from __future__ import annotations

import structlog  # noqa: F401 -- imported first, so the configuration below applies at once

from raftmeta.logs import configure_logging

configure_logging("warning", "console")
