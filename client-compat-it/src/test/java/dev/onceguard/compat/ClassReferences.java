package dev.onceguard.compat;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.stream.Stream;

/**
 * The classes and members a compiled class refers to, read from its constant pool: what the
 * JVM links when the code runs. Enough of the class file format (JVMS 4.4) to list them.
 */
final class ClassReferences {
  /** A field or method of another class, as the bytecode names it. */
  record Member(String owner, String name, String descriptor, boolean field) {
    @Override
    public String toString() {
      return owner.replace('/', '.') + (field ? "." : "#") + name + descriptor;
    }
  }

  final Set<String> classes = new LinkedHashSet<>();
  final Set<Member> members = new LinkedHashSet<>();

  /** Reads every class file under a directory or in a jar. */
  static ClassReferences ofAll(Path classesOrJar) throws IOException {
    ClassReferences refs = new ClassReferences();
    if (Files.isDirectory(classesOrJar)) {
      try (Stream<Path> files = Files.walk(classesOrJar)) {
        for (Path p : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".class"))::iterator) {
          try (InputStream in = Files.newInputStream(p)) {
            refs.read(in);
          }
        }
      }
    } else {
      try (JarFile jar = new JarFile(classesOrJar.toFile())) {
        for (Enumeration<JarEntry> e = jar.entries(); e.hasMoreElements(); ) {
          JarEntry entry = e.nextElement();
          if (entry.getName().endsWith(".class")) {
            try (InputStream in = jar.getInputStream(entry)) {
              refs.read(in);
            }
          }
        }
      }
    }
    return refs;
  }

  private void read(InputStream stream) throws IOException {
    DataInputStream in = new DataInputStream(stream);
    if (in.readInt() != 0xCAFEBABE) {
      throw new UncheckedIOException(new IOException("not a class file"));
    }
    in.readUnsignedShort(); // minor
    in.readUnsignedShort(); // major
    int count = in.readUnsignedShort();
    Object[] pool = new Object[count];
    List<int[]> classRefs = new ArrayList<>(); // slot, name index
    List<int[]> memberRefs = new ArrayList<>(); // tag, class index, name-and-type index
    for (int i = 1; i < count; i++) {
      int tag = in.readUnsignedByte();
      switch (tag) {
        case 1 -> pool[i] = in.readUTF();
        case 3, 4 -> in.readInt();
        case 5, 6 -> {
          in.readLong();
          i++; // takes two slots
        }
        case 7 -> classRefs.add(new int[] {i, in.readUnsignedShort()});
        case 8, 16, 19, 20 -> in.readUnsignedShort();
        case 9, 10, 11 -> memberRefs.add(new int[] {tag, in.readUnsignedShort(), in.readUnsignedShort()});
        case 12 -> pool[i] = new int[] {in.readUnsignedShort(), in.readUnsignedShort()};
        case 15 -> {
          in.readUnsignedByte();
          in.readUnsignedShort();
        }
        case 17, 18 -> in.readInt();
        default -> throw new IOException("unknown constant pool tag " + tag);
      }
    }
    // Class entries point at a Utf8 that may come later in the pool: resolve once it is read.
    Map<Integer, String> classNames = new HashMap<>();
    for (int[] ref : classRefs) {
      String name = (String) pool[ref[1]];
      classNames.put(ref[0], name);
      String element = name.replaceFirst("^\\[+L?", "").replaceFirst(";$", "");
      classes.add(element);
    }
    for (int[] ref : memberRefs) {
      int[] nameAndType = (int[]) pool[ref[2]];
      members.add(new Member(
          classNames.get(ref[1]), (String) pool[nameAndType[0]], (String) pool[nameAndType[1]], ref[0] == 9));
    }
  }
}
