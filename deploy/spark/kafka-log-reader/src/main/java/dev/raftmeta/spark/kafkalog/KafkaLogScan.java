package dev.raftmeta.spark.kafkalog;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;

/**
 * One query's scan and its batch: one input partition per segment or snapshot file, or per byte
 * range of a file larger than the split size ({@link SplitPlanner}), each row holding only the
 * columns the query reads (Spark prunes them: {@link #pruneColumns}). What a pruned column costs
 * is not paid: its value is not converted into Spark's row, and the batch's SHA-256 is not
 * computed when no one reads {@code batch_digest}. Every record is still decoded by Kafka's code,
 * so a record that does not decode is a damage row whatever the columns.
 */
final class KafkaLogScan implements ScanBuilder, SupportsPushDownRequiredColumns, Scan, Batch {
  private final String[] logDirs;
  private final Set<String> onlyFiles; // null: every segment and snapshot
  private final long splitBytes; // 0: one input partition per file
  private StructType columns = LogRows.SCHEMA;

  KafkaLogScan(String[] logDirs, Set<String> onlyFiles, long splitBytes) {
    this.logDirs = logDirs;
    this.onlyFiles = onlyFiles;
    this.splitBytes = splitBytes;
  }

  @Override
  public void pruneColumns(StructType required) {
    columns = required;
  }

  @Override
  public Scan build() {
    return this;
  }

  @Override
  public StructType readSchema() {
    return columns;
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  /**
   * Every segment and snapshot of every directory, in name order (the offset order Kafka's file
   * names give), each with the node id its directory's meta.properties names, and cut into byte
   * ranges when larger than the split size. A directory that cannot be listed fails the job by
   * name: a missing node must not read as an empty one.
   */
  @Override
  public InputPartition[] planInputPartitions() {
    List<InputPartition> splits = new ArrayList<>();
    for (String raw : logDirs) {
      String logDir = raw.strip();
      Path dir = Paths.get(logDir);
      Integer node = NodeIds.of(dir);
      List<String> names;
      try (Stream<Path> files = Files.list(dir)) {
        names =
            files
                .map(p -> p.getFileName().toString())
                .filter(n -> n.endsWith(".log") || n.endsWith(".checkpoint"))
                .filter(n -> onlyFiles == null || onlyFiles.contains(n))
                .sorted()
                .toList();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot list the metadata log directory " + logDir, e);
      }
      for (String name : names) {
        Path file = dir.resolve(name);
        long size;
        try {
          size = Files.size(file);
        } catch (IOException e) {
          throw new UncheckedIOException("cannot read " + file, e);
        }
        splits.addAll(SplitPlanner.plan(node, logDir, file, size, splitBytes));
      }
    }
    return splits.toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new LogFileReaderFactory(LogRows.indices(columns));
  }
}
