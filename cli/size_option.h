// The one CLI11 validator for size options (--pool, --size, ...) of both
// programs, dmbench and dmb_micro: what systems::ParseSize reads.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "systems/knobs.h"

namespace dmb::cli {

// A size systems::ParseSize reads: 64B, 4KB, 1MB, 1GB or a byte count.
inline CLI::Validator Size() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (systems::ParseSize(v)) return {};
        return "expected a size like 64B, 4KB, 1MB, 1GB or a byte count, got \"" + v + "\"";
      },
      "SIZE");
}

// The size a Size()-checked option holds.
inline uint64_t SizeOf(const std::string& checked) { return *systems::ParseSize(checked); }

}  // namespace dmb::cli
