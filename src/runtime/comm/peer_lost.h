// PeerLostError: what a transport throws when a peer went away (its process
// ended, or it was silent past the timeout), recoverable by re-forming the
// job, unlike a bug (runtime/comm/transport.h: isPeerLost).
#pragma once

#include <stdexcept>

namespace hydrozoa::runtime {

struct PeerLostError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace hydrozoa::runtime
