// An asio io_context run by a fixed number of threads until Join(): the
// event loop under RPC clients and servers (each of them takes the
// io_context by reference, so it must outlive them; join first, then
// destroy the objects whose handlers ran on it).
// Thread-safe: io() from any thread; Join once, from the owner (the
// destructor joins if Join was not called). Join from one of its own
// threads deadlocks.
#pragma once

#include <asio.hpp>
#include <optional>
#include <thread>
#include <vector>

namespace logfs::rpc {

class IoThreads {
 public:
  explicit IoThreads(int threads) : work_(asio::make_work_guard(io_)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~IoThreads() { Join(); }

  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  asio::io_context& io() { return io_; }

  // Stops the loop (handlers not yet run are dropped) and joins the
  // threads. Idempotent.
  void Join() {
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

}  // namespace logfs::rpc
