// `hydrozoa worker`: the process the coordinator starts for each (replica,
// stage); the full program's alone (NOTE [The front end and the full program]).
#include <sys/prctl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <csignal>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/units.h"
#include "runtime/worker.h"

namespace hydrozoa::cli {

void addWorkerCommand(CLI::App& app, Status* status) {
  auto a = std::make_shared<runtime::WorkerArgs>();
  auto token = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("worker", "");  // started by the coordinator
  cmd->group("");
  cmd->add_option("--join", a->join)->required();
  cmd->add_option("--id", a->id)->required();
  cmd->add_option("--token", *token, "The job token (default: $HYDROZOA_TOKEN)");
  cmd->callback([a, token, status] {
    ::umask(077);
    // `pgrep hydrozoa` finds workers by this name (15 characters at most); the
    // launcher's argv[0] says which one it is ("hydrozoa-worker r0s1").
    ::prctl(PR_SET_NAME, "hydrozoa-worker", 0, 0, 0);
    if (!token->empty()) {
      a->token = *token;
    } else if (const char* env = std::getenv("HYDROZOA_TOKEN")) {
      a->token = env;
    }
    if (a->token.empty()) {
      *status = invalidArgument("a worker needs the job token ($HYDROZOA_TOKEN)");
      return;
    }
    if (const char* env = std::getenv("HYDROZOA_COORDINATOR_TIMEOUT")) {
      auto seconds = parseSeconds(env, "$HYDROZOA_COORDINATOR_TIMEOUT");
      if (!seconds.ok() || !(*seconds >= 1 && *seconds <= 86400)) {
        *status = invalidArgument(fmt::format("$HYDROZOA_COORDINATOR_TIMEOUT {}: expected 1 s to 24 h (e.g. 30s)", env));
        return;
      }
      a->coordinator_timeout = *seconds;
    }
    // A send to a peer that just died must fail as a lost peer (EPIPE: Gloo
    // throws, the worker reports it), not kill this worker too: with the
    // default action a neighbour of a killed worker died of SIGPIPE first,
    // and the coordinator recovered from the wrong loss (seen in CI:
    // "Lost worker 0 ... killed by signal 13" for a SIGKILL of worker 1).
    std::signal(SIGPIPE, SIG_IGN);
    // NOTE [NCCL's waits] (runtime/comm/c10d_transport.cc): set before any
    // thread starts, where no getenv() can race it.
    ::setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
    const int code = runtime::runWorker(*a);
    if (code != 0) std::exit(code);
  });
}

}  // namespace hydrozoa::cli
