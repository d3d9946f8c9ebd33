#include "apps/swap/trace.h"

#include <algorithm>
#include <stdexcept>

namespace dmb::apps::swap {
namespace {

constexpr char kMagic[] = "DMBSWPT1";

void PutVarint(std::string* s, uint64_t v) {
  while (v >= 0x80) {
    s->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s->push_back(static_cast<char>(v));
}

bool GetVarint(const std::string& s, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < s.size(); shift += 7) {
    uint8_t b = static_cast<uint8_t>(s[(*pos)++]);
    *v |= uint64_t{b & 0x7fu} << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace

uint32_t ScaledEpochPages(uint64_t working_set_pages) {
  const uint64_t e =
      std::max<uint64_t>(working_set_pages / kEpochWorkingSetDivisor, kMinEpochPages);
  return static_cast<uint32_t>(std::min<uint64_t>(e, uint64_t{1} << 31));
}

uint64_t Trace::TouchedPages() const {
  uint64_t n = 0;
  for (const TraceEvent& e : events) {
    if (e.op == TraceOp::kRead || e.op == TraceOp::kWrite) n += e.pages;
  }
  return n;
}

// Header: magic, threads, address_pages, event count. Event: one byte
// (op | thread << 3), varint pages, zigzag varint of first_page minus the
// end of the previous event's range.
std::string Trace::Serialize() const {
  std::string s(kMagic);
  PutVarint(&s, threads);
  PutVarint(&s, address_pages);
  PutVarint(&s, events.size());
  uint64_t prev_end = 0;
  for (const TraceEvent& e : events) {
    s.push_back(static_cast<char>(static_cast<uint8_t>(e.op) | (e.thread << 3)));
    PutVarint(&s, e.pages);
    PutVarint(&s, ZigZag(static_cast<int64_t>(e.first_page - prev_end)));
    prev_end = e.first_page + e.pages;
  }
  return s;
}

bool Trace::Parse(const std::string& bytes, Trace* out) {
  const size_t magic = sizeof(kMagic) - 1;
  if (bytes.compare(0, magic, kMagic) != 0) return false;
  size_t pos = magic;
  uint64_t threads, pages, n;
  if (!GetVarint(bytes, &pos, &threads) || !GetVarint(bytes, &pos, &pages) ||
      !GetVarint(bytes, &pos, &n) || threads == 0 || threads > 32 || n > bytes.size()) {
    return false;
  }
  Trace t;
  t.threads = static_cast<uint32_t>(threads);
  t.address_pages = pages;
  t.events.reserve(n);
  uint64_t prev_end = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (pos >= bytes.size()) return false;
    uint8_t b = static_cast<uint8_t>(bytes[pos++]);
    uint64_t np, delta;
    if ((b & 7) > static_cast<uint8_t>(TraceOp::kBarrier)) return false;
    if (!GetVarint(bytes, &pos, &np) || !GetVarint(bytes, &pos, &delta)) return false;
    TraceEvent e{static_cast<TraceOp>(b & 7), static_cast<uint8_t>(b >> 3),
                 static_cast<uint32_t>(np), prev_end + static_cast<uint64_t>(UnZigZag(delta))};
    prev_end = e.first_page + e.pages;
    t.events.push_back(e);
  }
  if (pos != bytes.size()) return false;
  *out = std::move(t);
  return true;
}

TraceRecorder::TraceRecorder(const RecorderOptions& o) : opt_(o), epochs_(o.threads) {
  if (o.threads == 0 || o.threads > 32 || o.epoch_pages == 0) {
    throw std::invalid_argument("bad recorder options");
  }
  trace_.threads = o.threads;
}

void TraceRecorder::Emit(TraceOp op, uint8_t thread, uint64_t first, uint64_t n) {
  while (n > 0) {  // an event holds at most 2^32 - 1 pages
    uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(n, 0xffffffffu));
    trace_.events.push_back({op, thread, k, first});
    first += k;
    n -= k;
  }
}

uint64_t TraceRecorder::Map(uint64_t bytes, uint8_t thread) {
  FlushAll();
  uint64_t first = trace_.address_pages;
  uint64_t n = (bytes + kPageBytes - 1) / kPageBytes;
  trace_.address_pages += n;
  Emit(TraceOp::kMap, thread, first, n);
  return first * kPageBytes;
}

void TraceRecorder::Unmap(uint64_t addr, uint64_t bytes, uint8_t thread) {
  FlushAll();
  Emit(TraceOp::kUnmap, thread, addr / kPageBytes, (bytes + kPageBytes - 1) / kPageBytes);
}

void TraceRecorder::Touch(uint8_t thread, uint64_t addr, uint64_t bytes, bool write) {
  if (bytes == 0 || !opt_.record) return;
  uint64_t first = addr / kPageBytes;
  uint64_t last = (addr + bytes - 1) / kPageBytes;
  Epoch& ep = epochs_[thread];
  if (first == last && first == ep.last_page && (ep.last_write || !write)) return;
  if (last - first + 1 >= opt_.epoch_pages) {
    Flush(thread);
    Emit(write ? TraceOp::kWrite : TraceOp::kRead, thread, first, last - first + 1);
    return;
  }
  for (uint64_t p = first; p <= last; ++p) {
    bool& w = ep.pages[p];
    w = w || write;
  }
  ep.last_page = last;
  ep.last_write = ep.pages[last];
  if (ep.pages.size() >= opt_.epoch_pages) Flush(thread);
}

void TraceRecorder::Flush(uint8_t thread) {
  Epoch& ep = epochs_[thread];
  if (ep.pages.empty()) return;
  std::vector<std::pair<uint64_t, bool>> v(ep.pages.begin(), ep.pages.end());
  std::sort(v.begin(), v.end());
  size_t i = 0;
  while (i < v.size()) {
    size_t j = i + 1;
    while (j < v.size() && v[j].first == v[j - 1].first + 1 && v[j].second == v[i].second) ++j;
    Emit(v[i].second ? TraceOp::kWrite : TraceOp::kRead, thread, v[i].first, j - i);
    i = j;
  }
  ep.pages.clear();
  ep.last_page = ~uint64_t{0};
}

void TraceRecorder::FlushAll() {
  for (uint32_t t = 0; t < opt_.threads; ++t) Flush(static_cast<uint8_t>(t));
}

void TraceRecorder::Barrier() {
  FlushAll();
  trace_.events.push_back({TraceOp::kBarrier, 0, 0, 0});
}

Trace TraceRecorder::Finish() {
  FlushAll();
  Trace t = std::move(trace_);
  trace_ = Trace{};
  trace_.threads = opt_.threads;
  return t;
}

}  // namespace dmb::apps::swap
