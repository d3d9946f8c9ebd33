// Knobs: the key=value configuration of an approach, spelled the same in
// experiment specs and on the command line (`--set granularity=4KB`).
//
// Spelling:
//  - sizes: `512B`, `4KB`, `1MB`, `1GB` (a power of two with a unit) or a plain
//    byte count (`4096`);
//  - booleans: `true` / `false`;
//  - integers: decimal, within the knob's [min, max];
//  - choices: one of the listed words (no approach has one yet).
// Validation throws ConfigError whose message names the system, the knob, what
// was expected and what was given, and lists the known knobs on a typo.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dmb::systems {

class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class KnobKind : uint8_t { kSize, kBool, kInt, kChoice };

struct KnobDef {
  std::string name;
  KnobKind kind = KnobKind::kInt;
  std::string default_value;  // in knob spelling
  std::string help;
  int64_t min = 0;  // kInt / kSize bounds (inclusive; max 0 = none)
  int64_t max = 0;
  std::vector<std::string> choices;  // kChoice
};

// Parses a size; nullopt when the spelling is not a size (see above).
std::optional<uint64_t> ParseSize(std::string_view s);
// "4KB", "1MB", "1536B": the shortest exact spelling.
std::string FormatSize(uint64_t bytes);

// Validated knob values of one system (every knob present, defaults filled).
class Knobs {
 public:
  Knobs() = default;
  Knobs(std::string system, std::map<std::string, std::string> values)
      : system_(std::move(system)), values_(std::move(values)) {}
  uint64_t Size(std::string_view name) const;
  bool Bool(std::string_view name) const;
  int64_t Int(std::string_view name) const;
  const std::string& Str(std::string_view name) const;
  const std::map<std::string, std::string>& values() const { return values_; }
  // "granularity=4KB,mw_type=2" in name order (for labels and result files).
  std::string ToString() const;

 private:
  std::string system_;
  std::map<std::string, std::string> values_;
};

// Checks `given` against `defs` and fills defaults; throws ConfigError.
Knobs ValidateKnobs(const std::string& system, const std::vector<KnobDef>& defs,
                    const std::map<std::string, std::string>& given);

// Splits "key=value" (for --set); throws ConfigError naming the argument.
std::pair<std::string, std::string> SplitAssignment(std::string_view arg);

// Adds one --set KNOB=VALUE to `knobs`; throws ConfigError when the argument
// is not KNOB=VALUE or names a knob `knobs` already holds (two --set of one
// knob: which should win is a guess, so neither does).
void AddAssignment(std::string_view arg, std::map<std::string, std::string>* knobs);

}  // namespace dmb::systems
