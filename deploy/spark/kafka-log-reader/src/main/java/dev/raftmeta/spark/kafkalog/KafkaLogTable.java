package dev.raftmeta.spark.kafkalog;

import java.util.EnumSet;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The table: its schema, and a new scan ({@link KafkaLogScan}) for every query, which keeps the
 * columns that query reads (one DataFrame's queries share one table, each its own columns).
 */
final class KafkaLogTable implements SupportsRead {
  private final String[] logDirs;
  private final Set<String> onlyFiles; // null: every segment and snapshot
  private final long splitBytes; // 0: one input partition per file

  KafkaLogTable(String[] logDirs, Set<String> onlyFiles, long splitBytes) {
    this.logDirs = logDirs;
    this.onlyFiles = onlyFiles;
    this.splitBytes = splitBytes;
  }

  @Override
  public String name() {
    return KafkaLogSource.SHORT_NAME;
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return LogRows.SCHEMA;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new KafkaLogScan(logDirs, onlyFiles, splitBytes);
  }
}
