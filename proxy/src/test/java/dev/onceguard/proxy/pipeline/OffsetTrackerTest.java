package dev.onceguard.proxy.pipeline;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class OffsetTrackerTest {

  private static OffsetTracker tracking(long... offsets) {
    OffsetTracker t = new OffsetTracker();
    for (long o : offsets) {
      t.track(o, 0);
    }
    return t;
  }

  @Test
  void commitOffset_nothingTracked_isMinusOne() {
    assertThat(new OffsetTracker().commitOffset()).isEqualTo(-1);
  }

  @Test
  void commitOffset_nothingFinished_isFirstTrackedOffset() {
    assertThat(tracking(5, 6, 7).commitOffset()).isEqualTo(5);
  }

  @Test
  void commitOffset_allFinishedInOrder_isLastPlusOne() {
    OffsetTracker t = tracking(0, 1, 2);
    t.complete(0);
    assertThat(t.commitOffset()).isEqualTo(1);
    t.complete(1);
    t.complete(2);
    assertThat(t.commitOffset()).isEqualTo(3);
    assertThat(t.size()).isZero();
  }

  @Test
  void commitOffset_gapInMiddle_stopsAtGap() {
    OffsetTracker t = tracking(10, 11, 12, 13);
    t.complete(10);
    t.complete(12);
    t.complete(13);
    assertThat(t.commitOffset()).isEqualTo(11);
  }

  @Test
  void commitOffset_gapFilledLater_jumpsOverEverythingFinished() {
    OffsetTracker t = tracking(10, 11, 12, 13);
    t.complete(13);
    t.complete(12);
    t.complete(10);
    assertThat(t.commitOffset()).isEqualTo(11);
    t.complete(11);
    assertThat(t.commitOffset()).isEqualTo(14);
  }

  @Test
  void commitOffset_firstRecordUnfinished_staysAtIt() {
    OffsetTracker t = tracking(0, 1, 2);
    t.complete(1);
    t.complete(2);
    assertThat(t.commitOffset()).isEqualTo(0);
  }

  @Test
  void commitOffset_offsetsWithHoles_compactedTopic_usesTrackedOffsetsOnly() {
    // offsets 3 and 6..8 do not exist (compaction, transaction markers)
    OffsetTracker t = tracking(2, 4, 5, 9);
    t.complete(2);
    assertThat(t.commitOffset()).isEqualTo(4);
    t.complete(4);
    t.complete(5);
    assertThat(t.commitOffset()).isEqualTo(9);
    t.complete(9);
    assertThat(t.commitOffset()).isEqualTo(10);
  }

  @Test
  void track_afterEverythingFinished_commitOffsetFollowsNewRecord() {
    OffsetTracker t = tracking(0);
    t.complete(0);
    t.track(1, 0);
    assertThat(t.commitOffset()).isEqualTo(1);
  }

  @Test
  void track_nonIncreasingOffset_isRejected() {
    OffsetTracker t = tracking(5);
    assertThatThrownBy(() -> t.track(5, 0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> t.track(4, 0)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void complete_untrackedOrTwice_isRejected() {
    OffsetTracker t = tracking(1, 3);
    assertThatThrownBy(() -> t.complete(2)).isInstanceOf(IllegalArgumentException.class);
    t.complete(3);
    assertThatThrownBy(() -> t.complete(3)).isInstanceOf(IllegalArgumentException.class);
    t.complete(1);
    assertThatThrownBy(() -> t.complete(1)).isInstanceOf(IllegalArgumentException.class);
    assertThat(t.commitOffset()).isEqualTo(4);
  }
}
