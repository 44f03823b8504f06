// The memory limit behind `dsx train --device_memory` and `dsx autotune`: the ledger refuses an
// allocation past the limit before it happens (as cudaMalloc would), counts nothing for it, and
// the model's activation figure is what the allocator really handed out.
#include <gtest/gtest.h>
#include <malloc.h>

#include "device/cpu_device.h"
#include "dsx/error.h"
#include "models/gpt2/config.h"
#include "models/gpt2/gpt2_cpu.h"
#include "zero/memory.h"

using dsx::zero::Buffer;
using dsx::zero::MemoryKind;
using dsx::zero::MemoryLedger;

namespace {

size_t heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}

}  // namespace

TEST(MemoryLimit, AnAllocationPastTheLimitFailsAndCountsNothing) {
  auto device = dsx::device::make_cpu_device();
  auto& stream = device->compute_stream();
  MemoryLedger ledger;
  ledger.set_limit(1000);
  ledger.add(MemoryKind::Activations, 400);
  Buffer<float> params(*device, stream, ledger, MemoryKind::Params, 100);  // 400 bytes: 800 held
  EXPECT_EQ(ledger.total(), 800u);
  try {
    Buffer<float> grads(*device, stream, ledger, MemoryKind::Grads, 51);  // 204 bytes: 1004 > 1000
    FAIL() << "over the limit";
  } catch (const dsx::Error& e) {
    EXPECT_EQ(e.kind(), dsx::ErrorKind::OutOfMemory);
    const std::string what = e.what();
    EXPECT_NE(what.find("0.00 MB of grads"), std::string::npos) << what;
    EXPECT_NE(what.find("smaller micro-batch"), std::string::npos) << what;
  }
  EXPECT_EQ(ledger.total(), 800u) << "the refused buffer is not counted";
  EXPECT_EQ(ledger.bytes(MemoryKind::Grads), 0u);
  Buffer<float> grads(*device, stream, ledger, MemoryKind::Grads, 50);  // exactly at the limit is fine
  EXPECT_EQ(ledger.total(), 1000u);
  EXPECT_EQ(ledger.peak_total(), 1000u);
  grads.reset();
  EXPECT_EQ(ledger.total(), 800u);
  EXPECT_EQ(ledger.peak_total(), 1000u) << "the peak stays";
  ledger.set_limit(0);
  Buffer<float> big(*device, stream, ledger, MemoryKind::Buffers, 1000);
  EXPECT_EQ(ledger.total(), 4800u) << "no limit";
}

TEST(MemoryLimit, Gpt2ActivationBytesAreWhatItAllocates) {
  const dsx::models::GPT2Config config = dsx::models::gpt2_preset("byte-tiny");
  for (bool checkpointing : {false, true}) {
    for (int batch : {1, 3, 8}) {
      const size_t before = heap_in_use();
      dsx::models::GPT2Cpu<float> model(config, batch, 16, checkpointing);
      const size_t allocated = heap_in_use() - before;
      const size_t counted = model.activation_bytes();
      const size_t ids = 2u * batch * 16 * sizeof(int32_t);  // counted, allocated at the first forward
      // The model's own bookkeeping (parameter specs, names) is the difference, and small.
      EXPECT_GE(allocated + ids, counted) << "batch " << batch;
      EXPECT_LT(allocated + ids - counted, 64u << 10) << "batch " << batch << " checkpointing " << checkpointing;
    }
  }
  // Linear in the micro-batch: what the autotuner's memory model assumes.
  dsx::models::GPT2Cpu<float> one(config, 1, 16), five(config, 5, 16);
  EXPECT_EQ(five.activation_bytes(), 5 * one.activation_bytes());
}
