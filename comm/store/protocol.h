// Wire format of the rendezvous store. Every message is a frame: u32 length, then the body.
// Bodies are built from u8/i32/i64 (little endian, as every host dsx runs on) and byte strings
// (u32 length + bytes), so NCCL ids and fabric addresses travel unchanged.
//
// Connection: server -> HELLO {magic, version, secret_required u8, nonce}
//             client -> JOIN  {magic, version, rank i32, world i32, role u8, mac}
//             server -> {status u8, message}   then requests {op u8, ...} / replies {status u8, ...}
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "dsx/error.h"

namespace dsx::comm::store_protocol {

inline constexpr uint32_t kMagic = 0x31585344;  // "DSX1"
inline constexpr uint16_t kVersion = 1;
inline constexpr uint32_t kMaxFrame = 256u << 20;  // larger frames are garbage, not store traffic
inline constexpr size_t kNonceBytes = 32;

enum class Op : uint8_t { Set = 1, Get = 2, Add = 3, Check = 4, Delete = 5, Bye = 6 };
enum class Status : uint8_t { Ok = 0, Timeout = 1, Rejected = 2 };
enum class Role : uint8_t { Rank = 0, Helper = 1 };  // a rank's main connection, or an extra one

// Key the server sets when a rank's main connection closes without saying goodbye: the value
// lists the ranks that vanished ("3" or "3,5"). Communicators poll it to name a dead peer.
inline constexpr const char* kDeadRanksKey = "dsx/store/dead_ranks";

class Writer {
 public:
  Writer& u8(uint8_t v) { return raw(&v, 1); }
  Writer& i32(int32_t v) { return raw(&v, 4); }
  Writer& i64(int64_t v) { return raw(&v, 8); }
  Writer& bytes(std::string_view s) {
    i32(static_cast<int32_t>(s.size()));
    return raw(s.data(), s.size());
  }
  // The frame: length prefix + body.
  std::string frame() const {
    std::string out(4, '\0');
    uint32_t n = static_cast<uint32_t>(body_.size());
    std::memcpy(out.data(), &n, 4);
    return out + body_;
  }

 private:
  Writer& raw(const void* p, size_t n) {
    body_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string body_;
};

// Reads a frame body; throws Comm on a short or malformed body (a peer that is not a dsx store).
class Reader {
 public:
  explicit Reader(std::string_view body) : body_(body) {}
  uint8_t u8() { return take<uint8_t>(); }
  int32_t i32() { return take<int32_t>(); }
  int64_t i64() { return take<int64_t>(); }
  std::string bytes() {
    int32_t n = i32();
    if (n < 0 || static_cast<size_t>(n) > body_.size() - pos_) bad();
    std::string s(body_.substr(pos_, static_cast<size_t>(n)));
    pos_ += static_cast<size_t>(n);
    return s;
  }

 private:
  template <typename T>
  T take() {
    if (body_.size() - pos_ < sizeof(T)) bad();
    T v;
    std::memcpy(&v, body_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  [[noreturn]] static void bad() {
    throw Error(ErrorKind::Comm, "store: malformed message (is another program listening on MASTER_PORT?)");
  }
  std::string_view body_;
  size_t pos_ = 0;
};

}  // namespace dsx::comm::store_protocol
