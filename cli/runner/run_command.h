// `dmbench run SPEC [--force] [--jobs N] [--filter GLOB] [--shard I/N]
// [--collect] [--meta-json FILE]`: the CLI face of runner.h.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace dmb::runner {

struct RunCommandArgs {
  std::string spec;
  bool force = false;
  int jobs = 0;  // 0: one per core
  std::string filter;
  std::string results = "results";
  std::string micro;  // default: $DMB_MICRO_PATH, else the dmb_micro beside this dmbench
  bool validate_only = false;
  std::vector<std::string> params;  // KEY=VALUE overrides (--param)
  std::string shard;                // "I/N"; empty: every point
  bool collect = false;
  std::string meta_json_file;
  std::string backend = "sim";
  std::vector<std::string> micro_args;
  bool points_json = false;
};

CLI::App* AddRunCommand(CLI::App& app, RunCommandArgs* args);
// Exit code: 0 all points have results, 1 some point failed (or, with
// --collect, has no result), 2 bad spec or option.
int RunCommand(const RunCommandArgs& args);

}  // namespace dmb::runner
