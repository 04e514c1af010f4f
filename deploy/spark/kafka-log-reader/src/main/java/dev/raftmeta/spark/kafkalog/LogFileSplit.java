package dev.raftmeta.spark.kafkalog;

import org.apache.spark.sql.connector.read.InputPartition;

/** One segment or snapshot file of one node's metadata log directory. */
record LogFileSplit(Integer node, String logDir, String file) implements InputPartition {}
