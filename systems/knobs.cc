#include "systems/knobs.h"

#include <charconv>

namespace dmb::systems {
namespace {

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string Expectation(const KnobDef& d) {
  switch (d.kind) {
    case KnobKind::kSize: {
      const std::string like =
          "a size like 512B, 4KB, 1MB, 1GB (a power of two) or a plain byte count";
      if (d.max > 0) {
        return like + ", from " + FormatSize(static_cast<uint64_t>(d.min)) + " to " +
               FormatSize(static_cast<uint64_t>(d.max));
      }
      return d.min > 0 ? like + ", at least " + FormatSize(static_cast<uint64_t>(d.min)) : like;
    }
    case KnobKind::kBool:
      return "true or false";
    case KnobKind::kInt: {
      std::string s = "an integer";
      if (d.max > 0)
        return s + " in [" + std::to_string(d.min) + ", " + std::to_string(d.max) + "]";
      return s + " >= " + std::to_string(d.min);
    }
    case KnobKind::kChoice:
      return "one of: " + Join(d.choices);
  }
  return "";
}

bool Valid(const KnobDef& d, const std::string& v) {
  switch (d.kind) {
    case KnobKind::kSize: {
      auto s = ParseSize(v);
      if (!s) return false;
      if (static_cast<int64_t>(*s) < d.min) return false;
      return d.max == 0 || static_cast<int64_t>(*s) <= d.max;
    }
    case KnobKind::kBool:
      return v == "true" || v == "false";
    case KnobKind::kInt: {
      auto i = ParseInt(v);
      return i && *i >= d.min && (d.max == 0 || *i <= d.max);
    }
    case KnobKind::kChoice:
      for (const auto& c : d.choices) {
        if (c == v) return true;
      }
      return false;
  }
  return false;
}

}  // namespace

std::optional<uint64_t> ParseSize(std::string_view s) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  auto n = ParseInt(s.substr(0, digits));
  if (!n || *n <= 0) return std::nullopt;
  const std::string_view unit = s.substr(digits);
  if (unit.empty()) return static_cast<uint64_t>(*n);
  int shift = -1;
  if (unit == "B") shift = 0;
  if (unit == "KB") shift = 10;
  if (unit == "MB") shift = 20;
  if (unit == "GB") shift = 30;
  if (unit == "TB") shift = 40;
  if (shift < 0) return std::nullopt;
  const uint64_t v = static_cast<uint64_t>(*n);
  if ((v & (v - 1)) != 0) return std::nullopt;  // units take powers of two
  if (shift > 0 && v > (uint64_t{1} << (62 - shift))) return std::nullopt;
  return v << shift;
}

std::string FormatSize(uint64_t bytes) {
  static const char* kUnits[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  uint64_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  if ((v & (v - 1)) != 0 && u == 0) return std::to_string(bytes);
  if ((v & (v - 1)) != 0) return std::to_string(bytes);
  return std::to_string(v) + kUnits[u];
}

uint64_t Knobs::Size(std::string_view name) const { return *ParseSize(Str(name)); }
bool Knobs::Bool(std::string_view name) const { return Str(name) == "true"; }
int64_t Knobs::Int(std::string_view name) const { return *ParseInt(Str(name)); }
const std::string& Knobs::Str(std::string_view name) const {
  auto it = values_.find(std::string(name));
  if (it == values_.end()) {
    throw ConfigError(system_ + ": internal error: knob '" + std::string(name) +
                      "' is read but not declared");
  }
  return it->second;
}

std::string Knobs::ToString() const {
  std::string out;
  for (const auto& [k, v] : values_) out += (out.empty() ? "" : ",") + k + "=" + v;
  return out;
}

Knobs ValidateKnobs(const std::string& system, const std::vector<KnobDef>& defs,
                    const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> values;
  for (const auto& d : defs) values[d.name] = d.default_value;
  for (const auto& [k, v] : given) {
    const KnobDef* def = nullptr;
    for (const auto& d : defs) {
      if (d.name == k) def = &d;
    }
    if (!def) {
      std::vector<std::string> names;
      for (const auto& d : defs) names.push_back(d.name);
      throw ConfigError(system + ": unknown knob '" + k +
                        "'; known knobs: " + (names.empty() ? "(none)" : Join(names)));
    }
    if (!Valid(*def, v)) {
      throw ConfigError(system + "." + k + ": expected " + Expectation(*def) + ", got " + Quote(v));
    }
    values[k] = v;
  }
  return Knobs(system, std::move(values));
}

std::pair<std::string, std::string> SplitAssignment(std::string_view arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ConfigError("--set " + std::string(arg) + ": expected KNOB=VALUE, e.g. granularity=4KB");
  }
  return {std::string(arg.substr(0, eq)), std::string(arg.substr(eq + 1))};
}

void AddAssignment(std::string_view arg, std::map<std::string, std::string>* knobs) {
  auto [key, value] = SplitAssignment(arg);
  if (auto it = knobs->find(key); it != knobs->end()) {
    throw ConfigError("--set " + key + " given twice (" + key + "=" + it->second + " and " +
                      std::string(arg) + "); give each knob once");
  }
  knobs->emplace(std::move(key), std::move(value));
}

}  // namespace dmb::systems
