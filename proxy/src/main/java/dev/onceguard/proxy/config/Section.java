package dev.onceguard.proxy.config;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A mapping of the YAML and the settings declared in it, in the order the reference page lists
 * them. A section class declares its settings with {@link #add}, so a setting cannot be read
 * without being on the page.
 *
 * @param path where the mapping is, as the reference page writes it ({@code routes[].retry})
 * @param about one or two sentences for the page: what the section configures
 */
public record Section(String path, String about, List<Setting<?>> settings) {

  static Section of(String path, String about) {
    return new Section(path, about, new ArrayList<>());
  }

  /** The key of the mapping within its parent ({@code retry}). */
  public String key() {
    String last = path.substring(path.lastIndexOf('.') + 1);
    return last.endsWith("[]") ? last.substring(0, last.length() - 2) : last;
  }

  /** Declares {@code setting} in this section and returns it, for a constant. */
  <T> Setting<T> add(Setting<T> setting) {
    settings.add(setting);
    return setting;
  }

  @Override
  public List<Setting<?>> settings() {
    return Collections.unmodifiableList(settings);
  }
}
