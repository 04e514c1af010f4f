"""Kafka's ``__cluster_metadata`` format, pure: record batches v2 (``batch``), the messages in
them -- ``ApiMessageAndVersion`` metadata records and KRaft's control records (``frames``) --
encoded by one generic reader and writer of Kafka's flexible-version message encoding
(``message``) from field tables written from Kafka's JSON schemas (``schema``, ``schemas``).
Kafka's JSON naming for display and golden comparison is ``json_view``. docs/log-format.md,
"Kafka's format". No IO.
"""
