// Flag validators (gflags DEFINE_validator) that say what is valid. gflags
// itself prints only "failed validation of new value 'V' for flag 'F'"
// (after the line these print), which names no rule.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>

namespace logfs::main {

// True if `value` >= kMin; else prints "logfs: --FLAG must be at least
// kMin, not VALUE" to stderr and returns false. For DEFINE_validator:
// `DEFINE_validator(io_threads, (&AtLeast<int32_t, 1>));` (the parentheses keep
// the comma from the macro). T is the flag's
// type (int32_t, int64_t, uint32_t, uint64_t).
template <typename T, long long kMin>
bool AtLeast(const char* flag, T value) {
  static_assert(std::is_integral_v<T>, "integer flags only");
  static_assert(kMin >= 0 || std::is_signed_v<T>, "an unsigned flag is never negative");
  if (value >= static_cast<T>(kMin)) return true;
  std::fprintf(stderr, "logfs: --%s must be at least %lld, not %s\n", flag, kMin,
               std::to_string(value).c_str());
  return false;
}

}  // namespace logfs::main
