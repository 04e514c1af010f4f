"""Names of the node's log events that tools outside the node read back (chaos's checks).

One place for each name, so the node and its readers cannot drift apart.
"""

from __future__ import annotations

# Logged once the quorum-state naming the vote is durable, before the vote's answer leaves:
# fields ``epoch`` and ``voted_id``. A node grants at most one candidate a vote per epoch.
VOTE_RECORDED_EVENT = "vote recorded"
