// gzip through zlib's deflate with a gzip wrapper (windowBits 15 + 16), at the best compression.
#include "cloud/gzip.h"

#include "dsx/error.h"

#ifdef DSX_HAVE_ZLIB
#include <zlib.h>
#endif

namespace dsx::cloud {

#ifdef DSX_HAVE_ZLIB

bool gzip_available() { return true; }

std::string gzip(std::string_view text) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw Error(ErrorKind::Internal, "zlib: deflateInit2 failed");
  }
  std::string out(deflateBound(&stream, uLong(text.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = uInt(text.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = uInt(out.size());
  const int rc = deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) throw Error(ErrorKind::Internal, "zlib: deflate did not finish");
  return out;
}

#else

bool gzip_available() { return false; }

std::string gzip(std::string_view) {
  throw Error(ErrorKind::Unsupported,
              "this dsx was built without zlib, so it cannot compress the user data: install "
              "zlib1g-dev and build dsx again");
}

#endif

}  // namespace dsx::cloud
