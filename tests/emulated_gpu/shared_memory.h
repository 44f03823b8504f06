// A kernel's shared memory under emulation: DSX_SHARED(T, name, count) gives every thread of a
// block the same array in the block's arena, and every read and write through it is checked
// against the other threads' accesses since the last barrier, as compute-sanitizer's racecheck
// does: two threads touch one address between barriers and one of them writes is a race,
// reported with the kernel, the array and both threads. Lanes of one warp that met in a warp
// exchange since are ordered. An index past the array is reported too.
#pragma once

#include <cstddef>

namespace dsx::emu {

// Checks and records one access of `bytes` at `address` (an element of array `name`).
void shared_access(const void* address, size_t bytes, bool write, const char* name);
// The block's copy of the array declared at `tag`: `bytes` bytes aligned for any vector type.
void* block_shared(const void* tag, size_t bytes, const char* name);
// The block's dynamic shared memory (the launch's third argument) and its size.
void* dynamic_shared(size_t* bytes);
// Reports an index outside an array and returns a scratch element to go on with.
void* shared_out_of_bounds(const char* name, long long index, size_t count, size_t element);

template <class T>
class SharedRef {
 public:
  SharedRef(T* p, const char* name) : p_(p), name_(name) {}
  operator T() const {
    shared_access(p_, sizeof(T), false, name_);
    return *p_;
  }
  SharedRef& operator=(T v) {
    shared_access(p_, sizeof(T), true, name_);
    *p_ = v;
    return *this;
  }
  SharedRef& operator=(const SharedRef& other) { return *this = T(other); }
  SharedRef& operator+=(T v) { return *this = T(*this) + v; }
  SharedRef& operator-=(T v) { return *this = T(*this) - v; }
  SharedRef& operator*=(T v) { return *this = T(*this) * v; }

 private:
  T* p_;
  const char* name_;
};

// Stands where a kernel would hold a `T*` into shared memory.
template <class T>
class SharedArray {
 public:
  SharedArray(T* base, size_t count, const char* name) : base_(base), count_(count), name_(name) {}
  SharedRef<T> operator[](long long i) const {
    if (i < 0 || size_t(i) >= count_)
      return {static_cast<T*>(shared_out_of_bounds(name_, i, count_, sizeof(T))), name_};
    return {base_ + i, name_};
  }
  SharedArray operator+(long long offset) const {
    return {base_ + offset, count_ - size_t(offset), name_};
  }

 private:
  T* base_;
  size_t count_;
  const char* name_;
};

}  // namespace dsx::emu

#define DSX_SHARED(T, name, count)                                                    \
  static const char name##_dsx_shared_tag = 0;                                       \
  const ::dsx::emu::SharedArray<T> name(                                             \
      static_cast<T*>(::dsx::emu::block_shared(&name##_dsx_shared_tag, sizeof(T) * (count), #name)), \
      (count), #name)
#define DSX_DYNAMIC_SHARED(T, name)                                                   \
  size_t name##_dsx_bytes = 0;                                                        \
  const ::dsx::emu::SharedArray<T> name(                                             \
      static_cast<T*>(::dsx::emu::dynamic_shared(&name##_dsx_bytes)), name##_dsx_bytes / sizeof(T), #name)
template <class T>
using dsx_shared_ptr = ::dsx::emu::SharedArray<T>;
