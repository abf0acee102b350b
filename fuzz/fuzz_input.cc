#include "fuzz/fuzz_input.h"

#include <glog/logging.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace logfs::fuzz {

uint8_t InputReader::TakeU8() {
  absl::string_view b = TakeBytes(1);
  return b.empty() ? 0 : static_cast<uint8_t>(b[0]);
}

uint16_t InputReader::TakeU16() {
  const uint16_t low = TakeU8();
  const uint16_t high = TakeU8();
  return static_cast<uint16_t>(low | (high << 8));
}

absl::string_view InputReader::TakeBytes(size_t n) {
  absl::string_view out = bytes_.substr(0, std::min(n, bytes_.size()));
  bytes_.remove_prefix(out.size());
  return out;
}

std::vector<FuzzRequest> SplitRequests(const uint8_t* data, size_t size, size_t requests_max) {
  InputReader in(data, size);
  std::vector<FuzzRequest> requests;
  while (!in.empty() && requests.size() < requests_max) {
    FuzzRequest request;
    request.selector = in.TakeU8();
    request.message = std::string(in.TakeBytes(in.TakeU16()));
    request.data = std::string(in.TakeBytes(in.TakeU16()));
    requests.push_back(std::move(request));
  }
  return requests;
}

std::string JoinRequests(const std::vector<FuzzRequest>& requests) {
  std::string out;
  auto put_part = [&out](const std::string& part) {
    CHECK_LE(part.size(), 0xffffu);
    out.push_back(static_cast<char>(part.size() & 0xff));
    out.push_back(static_cast<char>(part.size() >> 8));
    out += part;
  };
  for (const FuzzRequest& request : requests) {
    out.push_back(static_cast<char>(request.selector));
    put_part(request.message);
    put_part(request.data);
  }
  return out;
}

void WriteSeedsIfAsked(const std::vector<Seed>& seeds) {
  const char* dir = std::getenv("LOGFS_FUZZ_SEEDS");
  if (dir == nullptr || *dir == '\0') return;
  int rc = 0;
  for (const auto& [name, bytes] : seeds) {
    std::ofstream out(std::string(dir) + "/" + name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write seed %s/%s\n", dir, name.c_str());
      rc = 1;
    }
  }
  std::fprintf(stderr, "wrote %zu seeds to %s\n", seeds.size(), dir);
  std::exit(rc);
}

std::string MakeScratchDir(const std::string& name) {
  std::vector<std::string> parents;
  if (const char* dir = std::getenv("LOGFS_FUZZ_TMPDIR"); dir != nullptr && *dir != '\0') {
    parents.push_back(dir);
  }
  parents.push_back("/dev/shm");
  parents.push_back("/tmp");
  for (const std::string& parent : parents) {
    std::string tmpl = parent + "/logfs_fuzz_" + name + "_XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) return tmpl;
  }
  LOG(FATAL) << "no scratch dir for fuzz target " << name;
}

void EmptyDir(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::filesystem::remove_all(entry.path(), ec);
    CHECK(!ec) << "removing " << entry.path() << ": " << ec.message();
  }
  CHECK(!ec) << "listing " << dir << ": " << ec.message();
}

void MakeDirIn(const std::string& dir, const std::string& name) {
  std::error_code ec;
  std::filesystem::create_directory(dir + "/" + name, ec);
  CHECK(!ec) << "making " << dir << "/" << name << ": " << ec.message();
}

void WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  CHECK(out) << "writing " << path;
}

void QuietLogs() { FLAGS_minloglevel = google::GLOG_FATAL; }

}  // namespace logfs::fuzz
