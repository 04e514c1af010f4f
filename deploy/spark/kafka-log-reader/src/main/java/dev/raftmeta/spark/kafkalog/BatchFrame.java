package dev.raftmeta.spark.kafkalog;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.record.internal.CompressionType;
import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;

/**
 * One step of the walk over a file's bytes: the batch at a position as Kafka's own code frames it
 * (kafka-clients' MemoryRecords and record batch v2, its records split), or why the walk stops
 * there. Only the boundary is found here, from the batch's length header; where that length
 * cannot be trusted, or Kafka's framing refuses the batch's records, the walk stops, as
 * raftmeta's walk (raftmeta/records/kafka/walk.py) does.
 *
 * <p>The one rule for both callers: {@link LogWalk} yields a file's rows from it, and {@link
 * SplitPlanner} walks a large file with it on the driver to cut it at batch boundaries. So a
 * split starts exactly where the walk of the whole file reaches, and no split exists past where
 * that walk stops.
 */
final class BatchFrame {
  static final int LOG_OVERHEAD = 12; // baseOffset and batchLength
  private static final int HEADER_SIZE = 61;
  private static final int MAGIC_POSITION = 16;
  private static final long BATCH_BYTES_MAX = 64L * 1024 * 1024; // raftmeta's (records/codec.py)

  /** Why the walk stops here (LogRows.DAMAGE_*), or null: the batch is framed. */
  final String damage;
  /** The base offset the bytes claim; null when fewer than LOG_OVERHEAD bytes are left. */
  final Long baseOffset;
  /** The batch's size in bytes, length header included (0 when the walk stops). */
  final int size;

  final RecordBatch batch;
  final List<Record> records;

  private BatchFrame(String damage, Long baseOffset, int size, RecordBatch batch, List<Record> records) {
    this.damage = damage;
    this.baseOffset = baseOffset;
    this.size = size;
    this.batch = batch;
    this.records = records;
  }

  private static BatchFrame stop(String damage, Long baseOffset) {
    return new BatchFrame(damage, baseOffset, 0, null, null);
  }

  /**
   * The batch at {@code position} of {@code data} (absolute positions; its limit is where the
   * bytes end). Nothing of {@code data}'s position or limit is changed.
   */
  static BatchFrame at(ByteBuffer data, int position) {
    int remaining = data.limit() - position;
    if (remaining < LOG_OVERHEAD) {
      return stop(LogRows.DAMAGE_TRUNCATED, null);
    }
    long baseOffset = data.getLong(position);
    int batchLength = data.getInt(position + 8);
    if (batchLength < HEADER_SIZE - LOG_OVERHEAD || batchLength + (long) LOG_OVERHEAD > BATCH_BYTES_MAX) {
      return stop(LogRows.DAMAGE_UNREADABLE, baseOffset);
    }
    if (remaining < HEADER_SIZE) {
      return stop(LogRows.DAMAGE_TRUNCATED, baseOffset);
    }
    if (data.get(position + MAGIC_POSITION) != RecordBatch.MAGIC_VALUE_V2) {
      return stop(LogRows.DAMAGE_UNREADABLE, baseOffset);
    }
    int size = LOG_OVERHEAD + batchLength;
    if (size > remaining) {
      return stop(LogRows.DAMAGE_TRUNCATED, baseOffset);
    }
    ByteBuffer bytes = data.duplicate().position(position).limit(position + size).slice();
    RecordBatch batch;
    List<Record> records = new ArrayList<>();
    try {
      batch = MemoryRecords.readableRecords(bytes).batches().iterator().next();
      if (batch.compressionType() != CompressionType.NONE) {
        return stop(LogRows.DAMAGE_UNREADABLE, baseOffset); // KRaft writes its batches uncompressed
      }
      batch.forEach(records::add);
    } catch (RuntimeException e) { // Kafka's framing refuses the batch's records
      return stop(LogRows.DAMAGE_UNREADABLE, baseOffset);
    }
    return new BatchFrame(null, baseOffset, size, batch, records);
  }

  /** The batch's own bytes (a view of the walked data). */
  static ByteBuffer bytes(ByteBuffer data, int position, int size) {
    return data.duplicate().position(position).limit(position + size).slice();
  }
}
