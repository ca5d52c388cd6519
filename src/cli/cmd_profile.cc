// `hydrozoa profile`: per-layer costs of a model, measured here or predicted
// for a device; optionally the network between workers.
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/log.h"
#include "core/table.h"
#include "core/units.h"
#include "model/zoo.h"
#include "profile/measure.h"
#include "profile/network.h"
#include "profile/predict.h"
#include "profile/summary.h"
#include "report/profile_correction.h"
#include "report/run_report.h"

namespace hydrozoa::cli {
namespace {

struct ProfileArgs {
  std::string model, device, output = "profile.json", sizes = "1,2,4,8", optimizer = "sgd_momentum";
  std::string save_device, on = "cpu";
  std::vector<std::string> model_options;
  std::string from_run;
  int repeats = 5, warmup = 1, threads = 1, network_workers = 2;
  std::string min_time = "1s";
  std::uint64_t seed = 0;
  bool network = false;
};

// `--from-run RUN_DIR`: the run's profile corrected by what the run measured.
Status correctFromRun(const ProfileArgs& a, const CLI::App& cmd) {
  for (const char* other : {"--model", "--device", "--network", "--microbatch-sizes", "--model-option", "--on"}) {
    if (cmd.count(other) > 0) {
      return invalidArgument(fmt::format("--from-run takes the run's own model and profile; drop {}", other));
    }
  }
  HZ_ASSIGN_OR_RETURN(report::RunReport run, report::loadRunReport(a.from_run));
  namespace fs = std::filesystem;
  const fs::path own = fs::path(a.from_run) / "profile.json";
  std::error_code ec;
  if (!fs::exists(own, ec)) {
    return invalidArgument(fmt::format("{} has no profile.json: the run was given a plan (--plan), so there is no "
                                       "profile of it to correct",
                                       a.from_run));
  }
  if (fs::exists(a.output, ec) && fs::equivalent(own, a.output, ec)) {
    return invalidArgument(fmt::format("-o {} is the run's own profile, the record of what it planned with; write the "
                                       "corrected one elsewhere (-o corrected.json)",
                                       a.output));
  }
  HZ_ASSIGN_OR_RETURN(profile::Profile p, profile::loadProfile(own.string()));
  HZ_ASSIGN_OR_RETURN(report::ProfileCorrection c, report::correctProfile(p, run));
  TextTable t({"stage", "layers", "compute predicted", "measured", "factor", "update predicted", "measured", "factor"},
              {false, false, true, true, true, true, true, true});
  for (const auto& s : c.stages) {
    const bool update = s.update_predicted && s.update_measured;
    t.addRow({std::to_string(s.stage), s.layers, formatSeconds(s.predicted),
              formatSeconds(s.measured), fmt::format("{:.2f}x", s.factor),
              update ? formatSeconds(*s.update_predicted) : "-", update ? formatSeconds(*s.update_measured) : "-",
              update ? fmt::format("{:.2f}x", s.update_factor) : "-"});
  }
  std::cout << "Per-layer times of " << p.model << ", corrected from " << a.from_run << ":\n";
  if (c.stages.empty()) {
    std::cout << "  (no traced steps in trace.json: times unchanged)\n";
  } else {
    std::cout << t.render();
  }
  if (c.memory_worker) {
    std::cout << fmt::format("Worker memory: worker {} peaked at {} against its stage's planned {}; a worker process "
                             "before its model: {} -> {}\n",
                             *c.memory_worker, formatBytes(c.memory_peak), formatBytes(c.memory_planned),
                             formatBytes(c.runtime_before), formatBytes(c.runtime_after));
  } else {
    std::cout << "Worker memory: no peak in summary.json; unchanged\n";
  }
  HZ_RETURN_IF_ERROR(profile::saveProfile(c.profile, a.output));
  std::cout << fmt::format("Wrote {}; plan with it: hydrozoa train JOB --profile {} (or hydrozoa plan --profile {})\n",
                           a.output, a.output, a.output);
  return Status();
}

// `--on`: cpu, cuda or cuda:N (NOTE [Profiles on a GPU], profile/measure.cc).
Result<c10::Device> measuredOn(const std::string& on) {
  const std::regex form("cpu|cuda(:[0-9]{1,2})?");
  if (!std::regex_match(on, form)) {
    return invalidArgument(fmt::format("--on {}: use cpu, cuda or cuda:N (the GPU's index)", on));
  }
  return c10::Device(on);
}

Status runProfile(const ProfileArgs& a, const CLI::App& cmd) {
  if (a.model.empty()) return invalidArgument("--model is required (a zoo name, see `hydrozoa models`, or a .pt file)");
  if (!a.save_device.empty() && a.device.empty()) {
    return invalidArgument("--save-device writes the device a prediction used; add --device (cpu calibrates this one)");
  }
  HZ_ASSIGN_OR_RETURN(model::Options options, parseModelOptions(a.model_options));
  HZ_ASSIGN_OR_RETURN(std::vector<std::int64_t> sizes, parseSizeList(a.sizes, "--microbatch-sizes"));
  if (a.threads < 1) return invalidArgument("--threads must be at least 1");
  if (!a.device.empty() && cmd.count("--on") > 0) {
    return invalidArgument("--on says where to measure and --device what to predict for: give one of them");
  }
  profile::Profile p;
  if (a.device.empty()) {
    profile::MeasureOptions mo;
    HZ_ASSIGN_OR_RETURN(mo.on, measuredOn(a.on));
    mo.microbatch_sizes = sizes;
    mo.repeats = a.repeats;
    HZ_ASSIGN_OR_RETURN(mo.min_seconds, parseSeconds(a.min_time, "--min-time"));
    mo.warmup = a.warmup;
    mo.threads = a.threads;
    mo.optimizer = a.optimizer;
    mo.seed = a.seed;
    mo.progress = [](const std::string& line) { spdlog::info("{}", line); };
    HZ_ASSIGN_OR_RETURN(p, profile::measureProfile({a.model, options}, mo));
  } else {
    if (model::isTorchScriptPath(a.model)) {
      return invalidArgument("costs of a TorchScript model cannot be predicted; drop --device to measure them here");
    }
    HZ_ASSIGN_OR_RETURN(model::Arch arch, model::buildArch({a.model, options}));
    HZ_ASSIGN_OR_RETURN(profile::DeviceSpec device, deviceFor(a.device, a.threads));
    HZ_ASSIGN_OR_RETURN(p, profile::predictProfile(arch, device, sizes, a.optimizer));
    if (!a.save_device.empty()) {
      HZ_RETURN_IF_ERROR(writeFileAtomically(a.save_device, profile::deviceToYaml(device)));
      std::cout << "Wrote " << a.save_device << " (use it with --device " << a.save_device << ")\n";
    }
  }
  if (a.network) {
    spdlog::info("measuring the network between {} local workers (c10d Gloo)...", a.network_workers);
    profile::NetworkProbeOptions no;
    no.workers = a.network_workers;
    HZ_ASSIGN_OR_RETURN(p.network, profile::probeNetwork(no));
  }
  std::cout << profile::renderProfileTable(p);
  HZ_RETURN_IF_ERROR(profile::saveProfile(p, a.output));
  std::cout << "Wrote " << a.output << "\n";
  return Status();
}

}  // namespace

void addProfileCommand(CLI::App& app, Status* status) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand("profile", kProfileAbout);
  cmd->footer(
      "Without --device the model runs here and is measured (--on cuda: on this machine's GPU); with --device it "
      "is predicted.\n"
      "Examples:\n"
      "  hydrozoa profile --model resnet34 --microbatch-sizes 1,2,4,8 -o p.json\n"
      "  hydrozoa profile --model gpt --on cuda -o gpt-gpu.json\n"
      "  hydrozoa profile --model cnn --network -o cnn.json\n"
      "  hydrozoa profile --model bert12 --device k80 --microbatch-sizes 1,2,4,8,16 -o bert-k80.json\n"
      "  hydrozoa profile --model resnet50 --device cpu --save-device cpu.yaml -o r50-cpu.json\n"
      "  hydrozoa profile --from-run runs/cnn -o cnn-corrected.json\n");
  cmd->add_option("--model", a->model, "Zoo model name or TorchScript file");
  cmd->add_option("-O,--model-option", a->model_options, "Model size option key=value (repeatable)");
  cmd->add_option("--microbatch-sizes", a->sizes, "Comma-separated microbatch sizes")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Timed runs per layer (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--warmup", a->warmup, "Untimed runs first")->capture_default_str()->check(CLI::Range(0, 1000));
  cmd->add_option("--min-time", a->min_time, "Keep measuring at least this long (more runs for small models)")
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "Compute threads, as one worker will use")
      ->capture_default_str()
      ->check(CLI::Range(1, static_cast<int>(kThreadsRange.max)));
  cmd->add_option("--optimizer", a->optimizer, "sgd, sgd_momentum or adam (optimizer-state memory)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed for weights and inputs")->capture_default_str();
  cmd->add_option("--device", a->device, "Predict for k80, v100, a100, h100, cpu (calibrated) or a YAML file");
  cmd->add_option("--on", a->on, "Measure on cpu, or on a GPU: cuda or cuda:N (CUDA events, its allocator's memory)")
      ->capture_default_str();
  cmd->add_option("--save-device", a->save_device,
                  "Also write the device spec used (with --device cpu: this CPU's calibration) to this YAML file");
  cmd->add_flag("--network", a->network, "Also measure bandwidth, latency and allreduce between local workers");
  cmd->add_option("--network-workers", a->network_workers, "Workers in the allreduce fit")
      ->capture_default_str()
      ->check(CLI::Range(2, 64));
  cmd->add_option("--from-run", a->from_run,
                  "Correct the profile a `hydrozoa train` run planned with by what it measured (a run directory)");
  cmd->add_option("-o,--output", a->output, "Where to write the profile")->capture_default_str();
  cmd->callback([a, status, cmd] { *status = a->from_run.empty() ? runProfile(*a, *cmd) : correctFromRun(*a, *cmd); });
}

void addNetprobeWorkerCommand(CLI::App& app, Status* status) {
  struct Args {
    std::string join, sizes;
    int rank = 0, world = 2, repeats = 5;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("netprobe-worker", "");  // internal: started by `profile --network`
  cmd->group("");  // hidden from --help
  cmd->add_option("--join", a->join)->required();  // the probe's control socket; the token in $HYDROZOA_TOKEN
  cmd->add_option("--rank", a->rank)->required();
  cmd->add_option("--world", a->world)->required();
  cmd->add_option("--sizes", a->sizes)->required();
  cmd->add_option("--repeats", a->repeats);
  cmd->callback([a, status] {
    auto sizes = parseSizeList(a->sizes, "--sizes");
    if (!sizes.ok()) {
      *status = sizes.status();
      return;
    }
    const char* token = std::getenv("HYDROZOA_TOKEN");
    if (!token || !*token) {
      *status = invalidArgument("a network probe worker needs the probe's token ($HYDROZOA_TOKEN)");
      return;
    }
    try {
      *status = profile::runNetprobeWorker(a->join, token, a->rank, a->world, *sizes, a->repeats);
    } catch (const std::exception& e) {
      *status = unavailable(std::string("network probe worker: ") + e.what());
    }
  });
}

}  // namespace hydrozoa::cli
