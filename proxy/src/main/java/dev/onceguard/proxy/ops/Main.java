package dev.onceguard.proxy.ops;

public final class Main {
  public static void main(String[] args) {}
}
