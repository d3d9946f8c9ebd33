#include "fabric/sim/keys.h"

#include <cerrno>

#include "fabric/verbs.h"

namespace dmb::sim {

uint32_t KeyTable::Add(const std::string& node_name) {
  if (count_ >= max_keys_) {
    throw fabric::VerbsError(
        ENOMEM, "node '" + node_name + "': out of MR/MW keys (" + std::to_string(max_keys_) + ")");
  }
  const uint32_t idx = count_;
  if ((idx >> kChunkShift) >= chunks_.size()) {
    chunks_.push_back(std::make_unique<Entry[]>(size_t{1} << kChunkShift));
  }
  ++count_;
  return idx;
}

}  // namespace dmb::sim
