package dev.raftmeta.spark.kafkalog;

import java.util.List;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The rows of a metadata log file, the same columns in the same order as raftmeta's Python
 * reader gives (raftmeta/jobs/kafka_log_rows.py): one row per record of a batch that decodes
 * (record_index, offset, record_type ... set); one row for a batch whose records do not decode
 * (damage "record", offset the first record that fails); one row where the rest of the file cannot
 * be read, its length not to be trusted (damage "unreadable", or "truncated" when the bytes end
 * inside the batch). A batch whose CRC fails still gives its records, with crc_ok false.
 */
final class LogRows {
  private LogRows() {}

  static final String DAMAGE_RECORD = "record";
  static final String DAMAGE_UNREADABLE = "unreadable";
  static final String DAMAGE_TRUNCATED = "truncated";

  private static final DataType INTS = DataTypes.createArrayType(DataTypes.IntegerType, false);

  static final StructType SCHEMA =
      new StructType(
          new StructField[] {
            field("node", DataTypes.IntegerType),
            field("log_dir", DataTypes.StringType),
            field("file", DataTypes.StringType),
            field("position", DataTypes.LongType),
            field("base_offset", DataTypes.LongType),
            field("last_offset", DataTypes.LongType),
            field("partition_leader_epoch", DataTypes.IntegerType),
            field("control", DataTypes.BooleanType),
            field("crc_ok", DataTypes.BooleanType),
            field("batch_digest", DataTypes.StringType),
            field("damage", DataTypes.StringType),
            field("record_index", DataTypes.IntegerType),
            field("offset", DataTypes.LongType),
            field("record_type", DataTypes.StringType),
            field("record_version", DataTypes.IntegerType),
            field("topic_id", DataTypes.StringType),
            field("topic_name", DataTypes.StringType),
            field("partition_id", DataTypes.IntegerType),
            field("replicas", INTS),
            field("isr", INTS),
            field("adding_replicas", INTS),
            field("removing_replicas", INTS),
            field("elr", INTS),
            field("leader", DataTypes.IntegerType),
            field("leader_epoch", DataTypes.IntegerType),
            field("partition_epoch", DataTypes.IntegerType),
            field("broker_id", DataTypes.IntegerType),
            field("rack", DataTypes.StringType),
            field("fenced", DataTypes.BooleanType),
            field("config_resource_type", DataTypes.IntegerType),
            field("config_resource_name", DataTypes.StringType),
            field("config_name", DataTypes.StringType),
            field("config_value", DataTypes.StringType),
            field("voters", INTS),
          });

  private static StructField field(String name, DataType type) {
    return DataTypes.createStructField(name, type, true);
  }

  /** The indices in {@link #SCHEMA} of {@code columns}' fields, in their order. */
  static int[] indices(StructType columns) {
    int[] indices = new int[columns.size()];
    for (int i = 0; i < indices.length; i++) {
      indices[i] = SCHEMA.fieldIndex(columns.fields()[i].name());
    }
    return indices;
  }

  /** Whether the rows of {@code columns} (indices in {@link #SCHEMA}) hold {@code column}. */
  static boolean reads(int[] columns, String column) {
    int wanted = SCHEMA.fieldIndex(column);
    for (int index : columns) {
      if (index == wanted) {
        return true;
      }
    }
    return false;
  }

  /** One row under construction: columns by name, Spark's internal values inside. */
  static final class Row {
    private final Object[] values = new Object[SCHEMA.size()];

    Row set(String column, Object value) {
      values[SCHEMA.fieldIndex(column)] = internal(value);
      return this;
    }

    Row copy() {
      Row row = new Row();
      System.arraycopy(values, 0, row.values, 0, values.length);
      return row;
    }

    /** The row of {@code columns} (indices in {@link #SCHEMA}, in the order Spark reads them). */
    InternalRow build(int[] columns) {
      if (columns.length == values.length) {
        return new GenericInternalRow(values); // every column, in SCHEMA's order: nothing pruned
      }
      Object[] kept = new Object[columns.length];
      for (int i = 0; i < columns.length; i++) {
        kept[i] = values[columns[i]];
      }
      return new GenericInternalRow(kept);
    }

    private static Object internal(Object value) {
      if (value instanceof String s) {
        return UTF8String.fromString(s);
      }
      if (value instanceof List<?> list) {
        int[] ints = new int[list.size()];
        for (int i = 0; i < ints.length; i++) {
          ints[i] = (Integer) list.get(i);
        }
        return new GenericArrayData(ints);
      }
      return value;
    }
  }
}
