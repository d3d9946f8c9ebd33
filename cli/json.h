// JSON text the CLI writes (dmbench's --json output, the runner's point and
// meta files): one way to quote a string.
#pragma once

#include <string>
#include <string_view>

namespace dmb::cli {

// `s` as a JSON string literal, quotes included: '"' and '\' escaped, control
// characters as \n, \t, \r, \b, \f or \u00XX (RFC 8259 §7), so a knob, a
// spec finding or a hostname with a newline or a tab cannot break the file.
std::string JsonString(std::string_view s);

}  // namespace dmb::cli
