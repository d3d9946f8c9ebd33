// The CLI11 validators both programs, dmbench and dmb_micro, share: sizes
// (--pool, --size, ...: what systems::ParseSize reads) and bounded integers
// (--threads, --cns, --ops, ...), so one flag takes the same values in both.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
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

// An integer in [min, max], read by std::from_chars. Says what it expected
// and what it got (CLI11 puts the flag in front: `--threads: expected an
// integer in [1, 4096], got "x"`) and hands CLI11 the canonical spelling, so
// no octal "010" or "0x10". Use it with ->transform().
template <typename T>
CLI::Validator IntIn(T min, T max) {
  return CLI::Validator(
      [min, max](std::string& v) -> std::string {
        T out{};
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
        if (ec != std::errc() || end != v.data() + v.size() || out < min || out > max) {
          return "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                 "], got \"" + v + "\"";
        }
        v = std::to_string(out);
        return {};
      },
      "[" + std::to_string(min) + ", " + std::to_string(max) + "]");
}

// The size a Size()-checked option holds.
inline uint64_t SizeOf(const std::string& checked) { return *systems::ParseSize(checked); }

}  // namespace dmb::cli
