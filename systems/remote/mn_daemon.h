// The MN daemon (`dmbench mn`): one approach's MN side on a real RDMA device,
// serving CN processes that connect over the bootstrap channel.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace dmb::systems::remote {

struct MnDaemonOptions {
  std::string system;
  std::map<std::string, std::string> knobs;
  std::string device;     // "" = the first RDMA device
  int port = 0;           // TCP port to listen on; 0 = any free port
  std::string port_file;  // where to write the chosen port ("" = none)
  uint64_t pool_bytes = 256ull << 20;
  int mn_cores = 1;
  bool verbose = false;
};

// Serves until a client sends `shutdown` (or the process is killed). Returns
// the process exit code; errors are printed naming the problem.
int RunMnDaemon(const MnDaemonOptions& opts);

}  // namespace dmb::systems::remote
