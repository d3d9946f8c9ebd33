#include "systems/onesided_mw/metadata.h"

#include <stdexcept>
#include <string>

namespace dmb::systems::onesided_mw {

Task<std::unique_ptr<Metadata>> Metadata::Create(fabric::Node* mn, fabric::Pd* data_pd,
                                                 fabric::Mr* pool_mr, MetadataConfig cfg) {
  fabric::RequireCaps(*mn, {"mw_type2", "atomics", "masked_atomics"}, "onesided_mw metadata");
  std::unique_ptr<Metadata> md(new Metadata());
  md->node_ = mn;
  md->data_pd_ = data_pd;
  md->pool_mr_ = pool_mr;
  md->cfg_ = cfg;
  md->layout_ = Layout::Make(cfg.group_size, cfg.entries, cfg.dead_slots);
  const Layout& l = md->layout_;
  if (cfg.chunk_bytes == 0 || pool_mr->length() / cfg.chunk_bytes < cfg.entries) {
    throw std::invalid_argument("onesided_mw: the pool MR holds " +
                                std::to_string(pool_mr->length()) + " B, too small for " +
                                std::to_string(cfg.entries) + " chunks of " +
                                std::to_string(cfg.chunk_bytes) + " B");
  }
  if (!(pool_mr->access() & fabric::kMwBind) || !(pool_mr->access() & fabric::kLocalWrite)) {
    throw std::invalid_argument("onesided_mw: the pool MR needs MW_BIND and LOCAL_WRITE");
  }

  fabric::Memory& mem = mn->memory();
  md->base_ = mem.Alloc(l.total_bytes, l.region_align());
  // An element of 0 means "empty" and a READ of address 0 must fault, so the
  // region (whose MR the chain reads through) must not start at 0.
  if (md->base_ == 0) md->base_ = mem.Alloc(l.total_bytes, l.region_align());
  mem.Fill(md->base_, 0, l.total_bytes);

  md->meta_pd_ = mn->AllocPd();
  md->meta_mr_ = co_await mn->RegMr(
      md->meta_pd_, md->base_, l.total_bytes,
      fabric::kLocalWrite | fabric::kRemoteRead | fabric::kRemoteWrite | fabric::kRemoteAtomic);

  md->mws_.reserve(uint64_t{cfg.entries} * cfg.group_size);
  std::vector<uint8_t> buf(l.entry_stride);
  for (uint32_t i = 0; i < cfg.entries; ++i) {
    EntryImage e;
    e.owner_ptr = md->owner_addr(i);
    e.handle = md->entry_addr(i);
    e.base = md->chunk_addr(i);
    for (uint32_t k = 0; k < cfg.group_size; ++k) {
      fabric::Mw* mw = mn->AllocMw(data_pd, fabric::MwType::kType2);
      md->mws_.push_back(mw);
      e.rkeys.push_back(mw->rkey());
      e.next_rkeys.push_back(mw->rkey());  // no key rotation (layout.h)
    }
    EncodeEntry(l, e, buf.data());
    mem.Write(md->entry_addr(i), buf.data(), buf.size());
    md->StoreElement(i, md->entry_addr(i));
  }
  md->StoreHead(md->ring_addr());
  md->StoreTail(l.Advance(md->ring_addr(), cfg.entries, md->ring_addr()));
  co_return md;
}

int64_t Metadata::EntryOf(uint64_t handle) const {
  const uint64_t table = base_ + layout_.table_off;
  if (handle < table) return -1;
  const uint64_t off = handle - table;
  if (off % layout_.entry_stride != 0 || off / layout_.entry_stride >= layout_.entries) return -1;
  return static_cast<int64_t>(off / layout_.entry_stride);
}

uint64_t Metadata::LoadElement(uint32_t slot) const {
  uint8_t b[8];
  node_->memory().Read(element_addr(slot), b, 8);
  return fabric::LoadBe64(b);
}

void Metadata::StoreElement(uint32_t slot, uint64_t entry_addr) {
  uint8_t b[8];
  fabric::StoreBe64(b, entry_addr);
  node_->memory().Write(element_addr(slot), b, 8);
}

EntryImage Metadata::LoadEntry(uint32_t i) const {
  std::vector<uint8_t> buf(layout_.entry_stride);
  node_->memory().Read(entry_addr(i), buf.data(), buf.size());
  return DecodeEntry(layout_, buf.data());
}

}  // namespace dmb::systems::onesided_mw
