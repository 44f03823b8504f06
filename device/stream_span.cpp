// Stream-timed spans (see stream_span.h).
#include "device/stream_span.h"

namespace dsx::device {

StreamSpan::StreamSpan(Device& device, Stream& stream, std::string name, const char* category, trace::Args args) {
  if (!trace::recording()) return;
  device_ = &device;
  stream_ = &stream;
  open_ = std::make_shared<Open>(Open{std::move(name), category, std::move(args)});
  device.host_task(
      stream, [open = open_] { open->begin = trace::Clock::now(); }, {}, "trace span begins");
}

StreamSpan::~StreamSpan() {
  if (!open_) return;
  const int track = trace::track(device_->name() + " " + stream_->name());
  try {
    device_->host_task(
        *stream_,
        [open = open_, track] {
          trace::span(track, std::move(open->name), open->category, open->begin, trace::Clock::now(),
                      std::move(open->args));
        },
        {}, "trace span ends");
  } catch (...) {
    // a stream that failed reports it where its work is waited for; a lost span is no loss
  }
}

}  // namespace dsx::device
