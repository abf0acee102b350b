// Precompiled header of the gcc build (Makefile "Precompiled headers"):
// the standard, absl, glog, protobuf and asio headers most objects include,
// parsed once per build and force-included (-include) into every object of
// the product. Sources still include what they use: the clang flavours
// (make tsa) build without it, so a missing #include fails there. Only
// headers from outside logfs go here (a header of ours would reach every
// layer, .ci/check_layers.sh).
// An include guard, not #pragma once: gcc warns of that in the file it
// precompiles.
#ifndef LOGFS_PCH_LIB_H_
#define LOGFS_PCH_LIB_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <asio.hpp>
#include <glog/logging.h>
#include <google/protobuf/arena.h>
#include <google/protobuf/generated_message_reflection.h>
#include <google/protobuf/generated_message_util.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/map.h>
#include <google/protobuf/map_entry.h>
#include <google/protobuf/map_field_inl.h>
#include <google/protobuf/message.h>
#include <google/protobuf/repeated_field.h>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#endif  // LOGFS_PCH_LIB_H_
