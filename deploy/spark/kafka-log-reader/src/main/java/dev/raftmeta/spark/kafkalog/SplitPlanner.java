package dev.raftmeta.spark.kafkalog;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Cuts a file larger than the split size into byte ranges at batch boundaries, on the driver.
 *
 * <p>Kafka's batches carry no sync marker: a task starting at an arbitrary byte cannot tell a
 * batch header from bytes inside a record that look like one (a ConfigRecord value can hold any
 * bytes), and whether the walk of the whole file stops before its range (a length that cannot be
 * trusted, records Kafka's framing refuses) depends on every batch before it. So the driver walks
 * the file once with the walk's own framing step ({@link BatchFrame}, no record decoded, no row
 * built), and cuts it at the first batch boundary at or after each {@code size / n} bytes (n
 * ranges of about the split size, as the Python data source's {@code split_bytes} does). A range
 * holds the batches that start in it, the one straddling its nominal end included; where the walk
 * stops, the last range begins at or before that point and runs to the file's end, so the task that
 * reads it finds the same damage. Each task then reads only its range.
 */
final class SplitPlanner {
  private SplitPlanner() {}

  /** The splits of {@code file} (of {@code size} bytes): one when it is not larger than {@code splitBytes}. */
  static List<LogFileSplit> plan(Integer node, String logDir, Path file, long size, long splitBytes) {
    String name = file.getFileName().toString();
    if (splitBytes <= 0 || size <= splitBytes) {
      return List.of(new LogFileSplit(node, logDir, name));
    }
    if (size > Integer.MAX_VALUE) {
      throw new IllegalArgumentException(file + " is " + size + " bytes: the reader reads files of up to 2 GiB");
    }
    long count = (size + splitBytes - 1) / splitBytes;
    long step = (size + count - 1) / count;
    List<Long> starts = new ArrayList<>(List.of(0L));
    MappedByteBuffer data;
    try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
      data = channel.map(FileChannel.MapMode.READ_ONLY, 0, size);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + file, e);
    }
    int position = 0;
    long cut = step;
    while (position < size && cut < size) {
      if (position >= cut) { // the first batch boundary at or after the nominal cut
        starts.add((long) position);
        while (cut <= position) {
          cut += step;
        }
      }
      BatchFrame frame = BatchFrame.at(data, position);
      if (frame.damage != null) {
        break; // the walk stops here: the range that holds this position reads on to the end
      }
      position += frame.size;
    }
    List<LogFileSplit> splits = new ArrayList<>(starts.size());
    for (int i = 0; i < starts.size(); i++) {
      long end = i + 1 < starts.size() ? starts.get(i + 1) : LogFileSplit.TO_END;
      splits.add(new LogFileSplit(node, logDir, name, starts.get(i), end));
    }
    return splits;
  }
}
