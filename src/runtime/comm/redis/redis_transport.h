// The storage channel: a Transport whose messages go through a Redis server
// instead of connections between workers (FuncPipe, Liu et al. 2022, §3.2;
// docs/functions.md, "The channel"). Serverless functions take no inbound
// connections and cannot reach each other; they all reach the store.
//
// Point to point: the k-th message from rank s to rank d under tag t is
// written, in chunks, to the list  <ns>:p:<s>:<d>:<t>:<k> ; the receiver
// pops the chunks in order (blocking reads), and Redis deletes a list once
// it is empty, so a key lives only while its message is in flight.
//
// Stage allreduce: a scatter-reduce through the store (NOTE [Scatter-reduce
// through storage], redis_transport.cc): FuncPipe's pipelined one (uploads
// and downloads in duplex on two connections) or, as the baseline,
// LambdaML's (three serial phases on one).
//
// Each direction to each peer has a thread and a connection of its own, so
// an upload never waits behind a download; every blocking read wakes each
// second to see whether it was aborted, and gives up (PeerLostError) after
// `timeout` without progress: the peer died, or its key was lost.
#pragma once

#include <memory>
#include <string>

#include "runtime/comm/redis/redis_client.h"
#include "runtime/comm/transport.h"

namespace hydrozoa::runtime::redis {

enum class SyncMethod {
  kPipelined,  // FuncPipe §3.3: 2·s/w + (2 + n)·t_lat
  kLambdaML,   // LambdaML's three phases: 3·s/w − 2·s/(n·w) + 4·t_lat
};
// "pipelined" | "lambdaml"; anything else is an error naming `what`.
Result<SyncMethod> parseSyncMethod(const std::string& text, const std::string& what);
const char* syncMethodName(SyncMethod m);

struct ChannelOptions {
  Address address;
  std::string password;
  std::string ns;  // every key starts with it: unique per job and generation
  int rank = 0, world_size = 1;
  int stage = 0, replica = 0, replicas = 1;
  SyncMethod sync = SyncMethod::kPipelined;
  Bytes chunk_bytes = Bytes{1} << 20;  // the unit of upload and download
  Seconds timeout = 120;               // without progress on a read
};

// Connects (the first connection checks the address and the password; an
// error names the server and the fix) and returns the transport.
Result<std::unique_ptr<Transport>> connectChannel(const ChannelOptions& options);

}  // namespace hydrozoa::runtime::redis
