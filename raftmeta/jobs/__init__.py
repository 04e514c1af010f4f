"""Spark jobs that replay and verify the committed logs of every node (DESIGN.md §9).

``layout`` finds node data dirs, ``columns`` decodes batches into Arrow columns (shared by the
Spark data source and the single-process reference checker), ``datasource`` registers the
``raftmeta`` Spark data source, ``session`` builds a quiet SparkSession, and ``consistency``
checks that the nodes' logs agree.
"""
