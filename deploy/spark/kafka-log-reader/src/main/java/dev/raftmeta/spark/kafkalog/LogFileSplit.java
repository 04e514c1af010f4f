package dev.raftmeta.spark.kafkalog;

import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One segment or snapshot file of one node's metadata log directory, or the bytes {@code start}
 * to {@code end} of it ({@code end} -1: to the file's end): the batches that start there, as
 * {@link SplitPlanner} cut the file at batch boundaries.
 */
record LogFileSplit(Integer node, String logDir, String file, long start, long end) implements InputPartition {
  static final long TO_END = -1;

  LogFileSplit(Integer node, String logDir, String file) {
    this(node, logDir, file, 0, TO_END);
  }
}
