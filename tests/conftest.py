"""Suite-wide setup: quiet, structured logs (warnings and errors still show in failure reports)."""

from __future__ import annotations

from raftmeta.logs import configure_logging

configure_logging("warning", "console")
