// A coordinator's control server and c10d Store service in a test, served
// from a thread as the coordinator's event loop serves them; clients are
// real ControlStores (runtime/comm/control_store.h).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "runtime/comm/control_store.h"
#include "wire/control.h"
#include "wire/store.h"

namespace hydrozoa::runtime {

// The coordinator's side: its control server and store service, served
// from a thread as the coordinator's event loop serves them.
class StoreServer {
 public:
  StoreServer() {
    auto server = wire::ControlServer::bind("127.0.0.1", 0, token_);
    EXPECT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
    thread_ = std::thread([this] {
      while (!stop_) {
        std::string from;
        Json m;
        const bool got = server_->receive(&from, &m, 20);
        wire::serveStore(*server_, store_, from, got ? &m : nullptr);
      }
    });
  }
  ~StoreServer() {
    stop_ = true;
    thread_.join();
  }
  std::string endpoint() const { return server_->endpoint(); }
  // Messages refused on authenticated connections; handshakes refused.
  std::int64_t refused() const { return server_->refused(); }
  std::int64_t refusedConnections() const { return server_->refusedConnections(); }

  c10::intrusive_ptr<ControlStore> client(const std::string& name, std::chrono::milliseconds timeout = std::chrono::seconds(5),
                                          const std::string& token = "") const {
    auto c = ControlStore::connect(endpoint(), name, server_->credential(token.empty() ? token_ : token), timeout);
    EXPECT_TRUE(c.ok()) << c.status().message();
    return *c;
  }

 private:
  std::string token_ = wire::newToken();
  std::unique_ptr<wire::ControlServer> server_;
  wire::StoreService store_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hydrozoa::runtime
