package dev.raftmeta.spark.kafkalog;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.internal.ControlRecordType;
import org.apache.kafka.common.record.internal.ControlRecordUtils;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * The rows of one file, or of one split of it, batch by batch. Each batch is framed by {@link
 * BatchFrame} (the walk stops where it says so, so that a damaged batch is a row that says so);
 * every batch, record and message is decoded by Kafka's own code: kafka-clients' MemoryRecords and
 * record batch v2, ControlRecordUtils for KRaft's control records, and kafka-metadata's
 * MetadataRecordSerde for the metadata records.
 */
final class LogWalk implements Iterable<InternalRow> {
  private static final int CONTROL_KEY_SIZE = 4; // int16 version, int16 type

  private final LogFileSplit split;
  private final ByteBuffer data;
  private final int[] columns;
  private final boolean digests;

  /**
   * {@code data}: the split's bytes, which start at byte {@code split.start()} of the file;
   * {@code columns}: the indices in {@link LogRows#SCHEMA} of the columns each row gives.
   */
  LogWalk(LogFileSplit split, byte[] data, int[] columns) {
    this.split = split;
    this.data = ByteBuffer.wrap(data);
    this.columns = columns;
    this.digests = LogRows.reads(columns, "batch_digest");
  }

  @Override
  public Iterator<InternalRow> iterator() {
    return new Iterator<>() {
      private int position = 0;
      private boolean stopped = false;
      private Iterator<InternalRow> pending = List.<InternalRow>of().iterator();

      @Override
      public boolean hasNext() {
        while (!pending.hasNext() && !stopped && position < data.limit()) {
          pending = nextBatch().iterator();
        }
        return pending.hasNext();
      }

      @Override
      public InternalRow next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return pending.next();
      }

      private List<InternalRow> nextBatch() {
        LogRows.Row row = new LogRows.Row();
        row.set("node", split.node())
            .set("log_dir", split.logDir())
            .set("file", split.file())
            .set("position", split.start() + position);
        BatchFrame frame = BatchFrame.at(data, position);
        row.set("base_offset", frame.baseOffset);
        if (frame.damage != null) {
          stopped = true;
          return List.of(row.set("damage", frame.damage).build(columns));
        }
        RecordBatch batch = frame.batch;
        row.set("last_offset", batch.lastOffset())
            .set("partition_leader_epoch", batch.partitionLeaderEpoch())
            .set("control", batch.isControlBatch())
            .set("crc_ok", batch.isValid());
        if (digests) {
          row.set("batch_digest", digest(BatchFrame.bytes(data, position, frame.size)));
        }
        position += frame.size;
        return recordRows(row, batch.isControlBatch(), frame.records, columns);
      }
    };
  }

  /** A row per record, or one row naming the first record that does not decode. */
  private static List<InternalRow> recordRows(
      LogRows.Row batchRow, boolean control, List<Record> records, int[] columns) {
    List<InternalRow> rows = new ArrayList<>(records.size());
    for (int index = 0; index < records.size(); index++) {
      Record record = records.get(index);
      LogRows.Row row = batchRow.copy().set("record_index", index).set("offset", record.offset());
      try {
        if (control) {
          control(row, record);
        } else {
          metadata(row, record);
        }
      } catch (RuntimeException e) {
        LogRows.Row damaged = batchRow.copy().set("offset", record.offset()).set("damage", LogRows.DAMAGE_RECORD);
        return List.of(damaged.build(columns));
      }
      rows.add(row.build(columns));
    }
    return rows;
  }

  private static void metadata(LogRows.Row row, Record record) {
    if (!record.hasValue()) {
      throw new IllegalArgumentException("a metadata record's value is its frame; it is null");
    }
    if (record.hasKey()) {
      throw new IllegalArgumentException("a metadata record's key is null");
    }
    ByteBuffer value = record.value();
    ApiMessageAndVersion decoded = MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(value), value.remaining());
    ApiMessage message = decoded.message();
    row.set("record_type", message.getClass().getSimpleName()).set("record_version", (int) decoded.version());
    RecordColumns.fill(row, message);
  }

  private static void control(LogRows.Row row, Record record) {
    ByteBuffer key = record.key();
    if (key == null || key.remaining() != CONTROL_KEY_SIZE) {
      throw new IllegalArgumentException("a control record's key is an int16 version and an int16 type");
    }
    short type = ControlRecordType.parseTypeId(key);
    row.set("record_version", (int) key.getShort(key.position()));
    ApiMessage message =
        switch (ControlRecordType.fromTypeId(type)) {
          case LEADER_CHANGE -> ControlRecordUtils.deserializeLeaderChangeMessage(record);
          case SNAPSHOT_HEADER -> ControlRecordUtils.deserializeSnapshotHeaderRecord(record);
          case SNAPSHOT_FOOTER -> ControlRecordUtils.deserializeSnapshotFooterRecord(record);
          case KRAFT_VERSION -> ControlRecordUtils.deserializeKRaftVersionRecord(record);
          case KRAFT_VOTERS -> ControlRecordUtils.deserializeVotersRecord(record);
          default -> null;
        };
    if (message == null) {
      row.set("record_type", controlName(type));
      return;
    }
    row.set("record_type", message.getClass().getSimpleName());
    RecordColumns.fill(row, message);
  }

  /** The names raftmeta's tables give the control types that carry no KRaft message. */
  private static String controlName(short type) {
    return switch (ControlRecordType.fromTypeId(type)) {
      case ABORT -> "AbortMarker";
      case COMMIT -> "CommitMarker";
      default -> "UnknownControlRecord(type=" + type + ")";
    };
  }

  private static String digest(ByteBuffer bytes) {
    try {
      MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
      sha256.update(bytes.duplicate());
      return HexFormat.of().formatHex(sha256.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }
}
