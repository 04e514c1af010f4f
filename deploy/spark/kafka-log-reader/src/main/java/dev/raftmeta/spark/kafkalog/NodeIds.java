package dev.raftmeta.spark.kafkalog;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Properties;

/** A log directory's node id: {@code node.id} of the meta.properties in its parent (Kafka's log.dirs). */
final class NodeIds {
  private NodeIds() {}

  /** The node id, or null when there is no meta.properties or it names none. */
  static Integer of(Path logDir) {
    Path parent = logDir.toAbsolutePath().getParent();
    if (parent == null) {
      return null;
    }
    Properties properties = new Properties();
    try (InputStream in = Files.newInputStream(parent.resolve("meta.properties"))) {
      properties.load(in);
    } catch (NoSuchFileException e) {
      return null;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + parent.resolve("meta.properties"), e);
    }
    String id = properties.getProperty("node.id");
    if (id == null) {
      return null;
    }
    try {
      return Integer.valueOf(id.strip());
    } catch (NumberFormatException e) {
      return null;
    }
  }
}
