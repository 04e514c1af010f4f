package dev.raftmeta.spark.kafkalog;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/**
 * Reads one split's bytes (a whole file, or its byte range) and yields its rows ({@link LogWalk}),
 * of the columns asked for.
 */
final class LogFileReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  private final int[] columns; // of LogRows.SCHEMA, in the order the rows give them

  LogFileReaderFactory(int[] columns) {
    this.columns = columns;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    LogFileSplit split = (LogFileSplit) partition;
    byte[] data;
    Path file = Paths.get(split.logDir(), split.file());
    try {
      data = read(file, split.start(), split.end());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + file, e);
    }
    Iterator<InternalRow> rows = new LogWalk(split, data, columns).iterator();
    return new PartitionReader<>() {
      private InternalRow current;

      @Override
      public boolean next() {
        if (!rows.hasNext()) {
          return false;
        }
        current = rows.next();
        return true;
      }

      @Override
      public InternalRow get() {
        return current;
      }

      @Override
      public void close() {}
    };
  }

  /** Bytes {@code start} to {@code end} of the file (to its end when {@code end} is -1). */
  private static byte[] read(Path file, long start, long end) throws IOException {
    if (start == 0 && end == LogFileSplit.TO_END) {
      return Files.readAllBytes(file);
    }
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      long stop = end == LogFileSplit.TO_END ? channel.size() : end;
      ByteBuffer buffer = ByteBuffer.allocate(Math.toIntExact(stop - start));
      while (buffer.hasRemaining()) {
        if (channel.read(buffer, start + buffer.position()) < 0) {
          // The file is shorter than when the split was planned: a range must never read as less.
          throw new IOException("the file ends at byte " + (start + buffer.position()) + ", before " + stop);
        }
      }
      return buffer.array();
    }
  }
}
