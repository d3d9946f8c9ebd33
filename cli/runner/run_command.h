// `dmbench run SPEC [--force] [--jobs N] [--filter GLOB]`: the CLI face of
// runner.h.
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
};

CLI::App* AddRunCommand(CLI::App& app, RunCommandArgs* args);
// Exit code: 0 all points have results, 1 some point failed, 2 bad spec.
int RunCommand(const RunCommandArgs& args);

}  // namespace dmb::runner
