#include "tests/emulated_gpu/order_check.h"

#include "device/stream_checker.h"
#include "dsx/error.h"

namespace dsx::emu {
namespace {

device::StreamChecker& checker() {
  static auto* c = new device::StreamChecker;  // never destroyed: workers outlive static destructors
  return *c;
}

}  // namespace

int add_order_actor(const std::string& name) { return checker().add_actor(name); }

std::string order_access(int actor, const std::vector<Touch>& touches, const char* what) {
  std::vector<device::Touch> ranges;
  ranges.reserve(touches.size());
  for (const Touch& t : touches)
    ranges.push_back({t.data, t.bytes, t.write ? device::Access::Write : device::Access::Read});
  try {
    checker().access(actor, ranges, what);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

OrderClock order_snapshot(int actor) { return checker().snapshot(actor); }
void order_merge(int actor, const OrderClock& clock) { checker().merge(actor, clock); }
void order_forget(const void* data, size_t bytes) { checker().forget(data, bytes); }

}  // namespace dsx::emu
