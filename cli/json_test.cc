#include "cli/json.h"

#include <gtest/gtest.h>

namespace dmb::cli {
namespace {

TEST(JsonString, QuotesAndEscapesWhatWouldBreakTheFile) {
  EXPECT_EQ(JsonString("granularity=4KB"), "\"granularity=4KB\"");
  EXPECT_EQ(JsonString("a \"b\" \\ c"), "\"a \\\"b\\\" \\\\ c\"");
  EXPECT_EQ(JsonString("line\nnext\ttab\r"), "\"line\\nnext\\ttab\\r\"");
  EXPECT_EQ(JsonString(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonString("§6.3 µs"), "\"§6.3 µs\"");  // UTF-8 passes through
}

}  // namespace
}  // namespace dmb::cli
