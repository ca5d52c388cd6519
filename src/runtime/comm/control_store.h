// A c10d::Store whose keys live in the coordinator (wire/store.h), reached
// over the control plane with the job's token: the rendezvous of process
// groups on machines that share nothing but the network (issue 10 §1).
//
// Each store holds its own control connection, named by the caller
// ("w3.store"), so its replies never mix with the worker's control
// messages. Calls are serialised (c10d calls a store from one thread at a
// time per group, but groups may share it). A call the coordinator does not
// answer within the store's timeout (plus a second for the round trip)
// throws, naming the endpoint: a coordinator that is gone, or a token it
// refuses (it answers nothing to a wrong token, NOTE [Routes are bound by
// the token]).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::wire {
class ControlClient;
}

namespace hydrozoa::runtime {

class ControlStore final : public c10d::Store {
 public:
  static Result<c10::intrusive_ptr<ControlStore>> connect(const std::string& endpoint, const std::string& name,
                                                          std::string token, std::chrono::milliseconds timeout);
  // Use connect().
  ControlStore(std::string endpoint, std::string name, std::string token, std::unique_ptr<wire::ControlClient> client,
               std::chrono::milliseconds timeout);
  ~ControlStore() override;

  // A store on a connection of its own ("<name>.1", "<name>.2", ...) to the
  // same keys: what c10d asks of a store it uses from another thread.
  c10::intrusive_ptr<c10d::Store> clone() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  // Deletes every key that starts with `prefix` in one request; how many.
  int64_t deletePrefix(const std::string& prefix);
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  // Sends `request` (op and its fields) and returns the reply with its id;
  // throws c10::Error when the reply says an error or none comes in time.
  Json call(Json request, std::chrono::milliseconds timeout);

  std::mutex mu_;
  std::string endpoint_, name_, token_;
  int clones_ = 0;
  std::unique_ptr<wire::ControlClient> client_;
  std::int64_t next_ = 0;
};

}  // namespace hydrozoa::runtime
