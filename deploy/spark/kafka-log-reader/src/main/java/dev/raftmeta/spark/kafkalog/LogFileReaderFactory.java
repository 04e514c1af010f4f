package dev.raftmeta.spark.kafkalog;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Iterator;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;

/** Reads one file's bytes and yields its rows ({@link LogWalk}). */
final class LogFileReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    LogFileSplit split = (LogFileSplit) partition;
    byte[] data;
    try {
      data = Files.readAllBytes(Paths.get(split.logDir(), split.file()));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + split.logDir() + "/" + split.file(), e);
    }
    Iterator<InternalRow> rows = new LogWalk(split, data).iterator();
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
}
