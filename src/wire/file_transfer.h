// Checkpoint files over the control plane (issue 10 §1): nothing shared
// between a worker and the coordinator but the network.
//
// A worker saves its stage's layer files into a directory of its own host,
// then ships each to the coordinator in "file_chunk" messages (kUploadChunk
// bytes as hex, under the control plane's 64 KB bound for a worker's
// message), in order, on its one control connection; its "checkpoint"
// message follows them, so every file of a stage is complete when the
// coordinator counts the stage saved. To resume, a worker fetches its
// layers' files with "fetch" requests, answered by "file_data" replies of at
// most kDownloadChunk bytes.
//
// The coordinator trusts none of it: a file's name must be a layer file
// ("layer-0007.pt", no path), of a layer the sender's stage holds; chunks
// must come in order and add up to the size announced, at most kMaxFileBytes;
// a file is renamed into place only when complete, so a step's directory
// never holds a partial file under a layer's name.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/files.h"
#include "core/status.h"

namespace hydrozoa::wire {

class ControlClient;

constexpr std::int64_t kUploadChunk = 24 * 1024;
constexpr std::int64_t kDownloadChunk = 1024 * 1024;
constexpr std::int64_t kMaxFileBytes = std::int64_t{64} << 30;

// "layer-0007.pt" -> 7; -1 for any other name (a path, "..", another file).
int layerOfFileName(const std::string& name);

// Worker side. Sends `path` as chunks, each `header` plus {"type":
// "file_chunk", "file": its name, "offset", "size", "data"}.
Status sendFile(ControlClient& control, const Json& header, const std::string& path);
// Fetches `file` into `dest`, asking with `request` plus {"type": "fetch",
// "file", "offset"}; a reply of another type goes to `other` (false: give up,
// e.g. on "stop"). Gives up after `timeoutSeconds` without a reply.
Status fetchFile(ControlClient& control, const Json& request, const std::string& file, const std::string& dest,
                 const std::function<bool(const Json&)>& other, double timeoutSeconds = 60);

// Coordinator side. Appends a "file_chunk" to `dir`/<file>.part, renaming it
// to <file> once complete; `allowed(layer)` says whether the sender may
// write that layer's file. Errors name what was wrong with the chunk.
Status acceptChunk(const Json& chunk, const std::string& dir, const std::function<bool(int)>& allowed);
// The reply to a "fetch" of a file in `dir`, or the error to report.
Result<Json> serveFetch(const Json& request, const std::string& dir, const std::function<bool(int)>& allowed);

}  // namespace hydrozoa::wire
