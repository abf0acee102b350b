// What every fault test of the fault suite shares (tests/fault_test.cc,
// partition_fault_test.cc, slow_replica_fault_test.cc): the trial length
// and the one row per trial that tests/faults.sh tabulates, with the
// durability checks behind it.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "bench/durability_checker.h"

namespace logfs::testing {

// Seconds the checker's writers run per trial: $LOGFS_FAULT_SECONDS (set
// by tests/faults.sh --seconds), else 3.
int TrialSeconds();

// One trial's outcome, summed over its checker runs.
struct FaultRow {
  std::string name;  // the fault's row in the table, e.g. "kill-2-segd"
  uint64_t acked_bytes = 0;
  uint64_t acked_bytes_lost = 0;
  absl::Duration longest_fsync;
  uint64_t write_errors = 0;
  uint64_t shrinks = 0;
  double seconds_to_full_replication = 0;  // 0: not measured
  std::string extra;                       // more " key=value" fields, e.g. the fsync percentiles
};

// The row of one checker run: its writers' report and the verification.
FaultRow RowOf(const std::string& name, const bench::WriteReport& written,
               const bench::VerifyReport& verified);

// Prints `row` as the "fault=NAME acked_bytes=..." line faults.sh reads.
void PrintFaultRow(const FaultRow& row);

// The promises every fault keeps (GoogleTest expectations): the writers
// acked something, every acked byte came back undamaged, no reader saw a
// file shrink, and no problem was found.
void ExpectDurable(const bench::WriteReport& written, const bench::VerifyReport& verified);

}  // namespace logfs::testing
