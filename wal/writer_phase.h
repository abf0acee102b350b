// The phase of a FileWriter: what it is doing besides taking appends. One
// value, guarded by the writer's mu_, and every change is CHECKed against
// this table (as RocksDB's cache/lru_cache.h writes its states down):
//
//   kIdle -> kRolling -> kIdle      Write opens the next segment (sealing the
//                                   full one first); TruncateToZero drops all;
//                                   AppendSegments appends another file's.
//   kIdle -> kSealing -> kIdle      SealAsync (close(2)): sync, then seal.
//   kIdle -> kClosing -> kClosed    Close: sync, seal, release the lease.
//   P -> kRecovering -> P           for P in {kIdle, kRolling, kSealing,
//                                   kClosing}: a replica failed; seal the
//                                   survivors and roll to a new segment on the
//                                   recovery pool, then resume P. A roll,
//                                   flush or close that waits for acks waits
//                                   out the recovery too and then sees the
//                                   new segment.
//   kRecovering -> kClosed          a Close that failed (its wait for acks
//                                   timed out) while the recovery ran.
//
// Writes are taken only in kIdle (they wait in the others; in kClosing
// and kClosed they fail). kClosed is final.
#pragma once

namespace logfs::wal {

enum class WriterPhase { kIdle, kRolling, kSealing, kRecovering, kClosing, kClosed };

// Whether the table above allows `from` -> `to`. kRecovering -> P is
// allowed for every P a recovery may interrupt; the writer also CHECKs
// that it goes back to the one it did interrupt, or to where that
// operation ended meanwhile (FileWriter::EndPhaseLocked).
constexpr bool IsAllowedTransition(WriterPhase from, WriterPhase to) {
  using P = WriterPhase;
  const bool resumable = to == P::kIdle || to == P::kRolling || to == P::kSealing ||
                         to == P::kClosing || to == P::kClosed;
  switch (from) {
    case P::kIdle:
      return to == P::kRolling || to == P::kSealing || to == P::kClosing || to == P::kRecovering;
    case P::kRolling:
    case P::kSealing:
      return to == P::kIdle || to == P::kRecovering;
    case P::kClosing:
      return to == P::kClosed || to == P::kRecovering;
    case P::kRecovering:
      return resumable;
    case P::kClosed:
      return false;
  }
  return false;
}

constexpr const char* WriterPhaseName(WriterPhase phase) {
  switch (phase) {
    case WriterPhase::kIdle:
      return "idle";
    case WriterPhase::kRolling:
      return "rolling";
    case WriterPhase::kSealing:
      return "sealing";
    case WriterPhase::kRecovering:
      return "recovering";
    case WriterPhase::kClosing:
      return "closing";
    case WriterPhase::kClosed:
      return "closed";
  }
  return "?";
}

}  // namespace logfs::wal
