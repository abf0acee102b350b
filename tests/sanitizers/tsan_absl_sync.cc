// Linked only into the ThreadSanitizer build (make tsan). Debian's libabsl
// is not built with -fsanitize=thread, so TSan cannot see the
// happens-before edges of absl::Mutex, CondVar, Notification and
// BlockingCounter (their atomics and futex waits are in the uninstrumented
// library) and would report every access guarded by an absl::Mutex as a
// race. Each function below replaces the library's symbol in our binaries
// (the executable's definition wins at link time), calls the library's own
// (found with dlsym(RTLD_NEXT)) and tells TSan of the edge with
// __tsan_release before a call that releases and __tsan_acquire after one
// that acquires. A Condition is evaluated inside those calls, by the
// waiter or by the thread unlocking, with the mutex held but after our
// release (or before our acquire), so Condition::Eval is replaced too: it
// acquires and releases the mutex of the call it runs in (kept in a
// thread_local), as absl's own TSan build does in EvalConditionAnnotated.
//
// absl::Status is the same case: its reference count drops inside
// libabsl_status, which then deletes the shared payload, so Status's
// UnrefNonInlined releases and acquires on the payload first (the last
// owner then sees every other owner's accesses before the delete).
//
// Not covered: Notification::HasBeenNotified(), which is inline; our code
// only uses it where nothing is read after it returns true. Calls that
// libabsl makes to itself (Notification locking its Mutex) may reach its
// own functions or these; either is right, the edges we need are those of
// our code's calls.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/status/status.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if !ABSL_OPTION_USE_INLINE_NAMESPACE
#error "the mangled names below assume absl's inline namespace"
#endif
#define LOGFS_TSAN_STR2(x) #x
#define LOGFS_TSAN_STR(x) LOGFS_TSAN_STR2(x)

namespace {

// The library's definition of the absl function mangled as `prefix`
// "4absl" <inline namespace> `rest`, e.g. ("_ZN", "5Mutex4LockEv").
// Aborts if it is missing, which means another absl version.
template <typename Fn>
Fn Real(const char* prefix, const char* rest) {
  const char* ns = LOGFS_TSAN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  std::string name = std::string(prefix) + "4absl" + std::to_string(std::strlen(ns)) + ns + rest;
  void* symbol = dlsym(RTLD_NEXT, name.c_str());
  if (symbol == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: no %s in libabsl\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(symbol);
}

// A non-virtual member function called through a plain function pointer
// with `this` first: what the Itanium C++ ABI does for it.
using Plain = void (*)(void*);
using PlainBool = bool (*)(void*);
using ConstPlainBool = bool (*)(const void*);
using UnrefFn = void (*)(uintptr_t);
using WithCondition = void (*)(void*, const absl::Condition*);
using WithConditionFor = bool (*)(void*, const absl::Condition*, absl::Duration);
using WithConditionUntil = bool (*)(void*, const absl::Condition*, absl::Time);
using WithMutex = void (*)(void*, absl::Mutex*);
using WithMutexFor = bool (*)(void*, absl::Mutex*, absl::Duration);
using WithMutexUntil = bool (*)(void*, absl::Mutex*, absl::Time);
using ConstPlain = void (*)(const void*);
using ConstFor = bool (*)(const void*, absl::Duration);
using ConstUntil = bool (*)(const void*, absl::Time);

constexpr char kCondition[] = "ERKNS0_9ConditionE";
constexpr char kConditionFor[] = "ERKNS0_9ConditionENS0_8DurationE";
constexpr char kConditionUntil[] = "ERKNS0_9ConditionENS0_4TimeE";

std::string Name(const char* function, const char* arguments) {
  return std::string(function) + arguments;
}

// The mutex whose Lock/Unlock/Await call this thread is inside, if any.
thread_local absl::Mutex* operating_on = nullptr;

// Sets operating_on for the life of one library call; nests.
class Operating {
 public:
  explicit Operating(absl::Mutex* mu) : outer_(operating_on) { operating_on = mu; }
  ~Operating() { operating_on = outer_; }
  Operating(const Operating&) = delete;
  Operating& operator=(const Operating&) = delete;

 private:
  absl::Mutex* const outer_;
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// --- Mutex: acquire after every lock, release before every unlock --------
void Mutex::Lock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<Plain>("_ZN", "5Mutex4LockEv");
  Operating operating(this);
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<Plain>("_ZN", "5Mutex6UnlockEv");
  __tsan_release(this);
  Operating operating(this);
  real(this);
}

bool Mutex::TryLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<PlainBool>("_ZN", "5Mutex7TryLockEv");
  Operating operating(this);
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::ReaderLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<Plain>("_ZN", "5Mutex10ReaderLockEv");
  Operating operating(this);
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderUnlock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<Plain>("_ZN", "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  Operating operating(this);
  real(this);
}

bool Mutex::ReaderTryLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<PlainBool>("_ZN", "5Mutex13ReaderTryLockEv");
  Operating operating(this);
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

// Await may unlock and lock again: release before, acquire after.
void Mutex::Await(const Condition& cond) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<WithCondition>("_ZN", Name("5Mutex5Await", kCondition).c_str());
  __tsan_release(this);
  Operating operating(this);
  real(this, &cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real =
      Real<WithConditionFor>("_ZN", Name("5Mutex16AwaitWithTimeout", kConditionFor).c_str());
  __tsan_release(this);
  Operating operating(this);
  bool met = real(this, &cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real =
      Real<WithConditionUntil>("_ZN", Name("5Mutex17AwaitWithDeadline", kConditionUntil).c_str());
  __tsan_release(this);
  Operating operating(this);
  bool met = real(this, &cond, deadline);
  __tsan_acquire(this);
  return met;
}

void Mutex::LockWhen(const Condition& cond) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<WithCondition>("_ZN", Name("5Mutex8LockWhen", kCondition).c_str());
  Operating operating(this);
  real(this, &cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real =
      Real<WithConditionFor>("_ZN", Name("5Mutex19LockWhenWithTimeout", kConditionFor).c_str());
  Operating operating(this);
  bool met = real(this, &cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<WithConditionUntil>(
      "_ZN", Name("5Mutex20LockWhenWithDeadline", kConditionUntil).c_str());
  Operating operating(this);
  bool met = real(this, &cond, deadline);
  __tsan_acquire(this);
  return met;
}

void Mutex::ReaderLockWhen(const Condition& cond) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real =
      Real<WithCondition>("_ZN", Name("5Mutex14ReaderLockWhen", kCondition).c_str());
  Operating operating(this);
  real(this, &cond);
  __tsan_acquire(this);
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<WithConditionFor>(
      "_ZN", Name("5Mutex25ReaderLockWhenWithTimeout", kConditionFor).c_str());
  Operating operating(this);
  bool met = real(this, &cond, timeout);
  __tsan_acquire(this);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  static const auto real = Real<WithConditionUntil>(
      "_ZN", Name("5Mutex26ReaderLockWhenWithDeadline", kConditionUntil).c_str());
  Operating operating(this);
  bool met = real(this, &cond, deadline);
  __tsan_acquire(this);
  return met;
}

// --- Condition: evaluated with the mutex held ------------------------------
bool Condition::Eval() const {
  static const auto real = Real<ConstPlainBool>("_ZNK", "9Condition4EvalEv");
  Mutex* mu = operating_on;
  if (mu != nullptr) __tsan_acquire(mu);
  bool met = real(this);
  if (mu != nullptr) __tsan_release(mu);
  return met;
}

// --- CondVar: a wait unlocks `mu` and locks it again ------------------------
void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<WithMutex>("_ZN", "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  Operating operating(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real =
      Real<WithMutexFor>("_ZN", "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  Operating operating(mu);
  bool timed_out = real(this, mu, timeout);
  __tsan_acquire(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real =
      Real<WithMutexUntil>("_ZN", "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  Operating operating(mu);
  bool timed_out = real(this, mu, deadline);
  __tsan_acquire(mu);
  return timed_out;
}

// --- Notification and BlockingCounter: signal releases, wait acquires -------
void Notification::Notify() {
  static const auto real = Real<Plain>("_ZN", "12Notification6NotifyEv");
  __tsan_release(this);
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real = Real<ConstPlain>("_ZNK", "12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(const_cast<Notification*>(this));
}

bool Notification::WaitForNotificationWithTimeout(Duration timeout) const {
  static const auto real = Real<ConstFor>(
      "_ZNK", "12Notification30WaitForNotificationWithTimeoutENS0_8DurationE");
  bool notified = real(this, timeout);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(Time deadline) const {
  static const auto real = Real<ConstUntil>(
      "_ZNK", "12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  bool notified = real(this, deadline);
  if (notified) __tsan_acquire(const_cast<Notification*>(this));
  return notified;
}

bool BlockingCounter::DecrementCount() {
  static const auto real = Real<PlainBool>("_ZN", "15BlockingCounter14DecrementCountEv");
  __tsan_release(this);
  bool zero = real(this);
  if (zero) __tsan_acquire(this);
  return zero;
}

void BlockingCounter::Wait() {
  static const auto real = Real<Plain>("_ZN", "15BlockingCounter4WaitEv");
  real(this);
  __tsan_acquire(this);
}

// --- Status: the last reference deletes the shared payload -----------------
void Status::UnrefNonInlined(uintptr_t rep) {
  static const auto real = Real<UnrefFn>("_ZN", "6Status15UnrefNonInlinedEm");
  void* payload = reinterpret_cast<void*>(rep);
  __tsan_release(payload);
  __tsan_acquire(payload);
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl
