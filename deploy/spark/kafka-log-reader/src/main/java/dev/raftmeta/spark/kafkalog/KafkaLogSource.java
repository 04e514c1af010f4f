package dev.raftmeta.spark.kafkalog;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("raftmeta-kafka-log").option("paths", "dir1,dir2").load()}: the rows
 * of every segment ({@code *.log}) and snapshot ({@code *.checkpoint}) in the given
 * {@code __cluster_metadata-0} directories ({@code option("files", ...)} keeps only the files of
 * those names; {@code option("split_bytes", N)} cuts files larger than N bytes into ranges of
 * about N bytes at batch boundaries, one task each), decoded by the pinned Kafka release's own code
 * ({@link LogRows} says which row is what).
 */
public final class KafkaLogSource implements TableProvider, DataSourceRegister {
  public static final String SHORT_NAME = "raftmeta-kafka-log";
  public static final String PATHS_OPTION = "paths";
  /** Optional: only the files of these names (comma-separated), e.g. one snapshot of each node. */
  public static final String FILES_OPTION = "files";
  /** Optional: split files larger than this many bytes into ranges of about this many (0: never). */
  public static final String SPLIT_BYTES_OPTION = "split_bytes";

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return LogRows.SCHEMA;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    String paths = properties.get(PATHS_OPTION);
    if (paths == null || paths.isBlank()) {
      throw new IllegalArgumentException(
          "option \"" + PATHS_OPTION + "\": give the __cluster_metadata-0 directories to read, comma-separated");
    }
    String files = properties.get(FILES_OPTION);
    return new KafkaLogTable(
        paths.split(","), files == null ? null : Set.of(files.split(",")), splitBytes(properties));
  }

  private static long splitBytes(Map<String, String> properties) {
    String text = properties.getOrDefault(SPLIT_BYTES_OPTION, "0").strip();
    long value;
    try {
      value = Long.parseLong(text);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "option \"" + SPLIT_BYTES_OPTION + "\" must be a whole number of bytes, got \"" + text + "\"", e);
    }
    if (value < 0) {
      throw new IllegalArgumentException(
          "option \"" + SPLIT_BYTES_OPTION + "\" must be 0 or more, got " + value);
    }
    return value;
  }
}
