// --world_info encoding: byte-identical to DeepSpeed (ref/launcher.md 4.1), lenient decoding.
#include <gtest/gtest.h>

#include "dsx/error.h"
#include "launcher/world_info.h"

using namespace dsx::launcher;

TEST(WorldInfo, DeepSpeedVectors) {
  EXPECT_EQ(encode_world_info({{"localhost", {0, 1}}}), "eyJsb2NhbGhvc3QiOiBbMCwgMV19");
  EXPECT_EQ(encode_world_info({{"worker-0", {0, 1}}, {"worker-1", {2}}}),
            "eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzJdfQ==");
  EXPECT_EQ(world_to_json({{"a", {}}, {"b", {3}}}), "{\"a\": [], \"b\": [3]}");
}

TEST(WorldInfo, RoundTripKeepsOrder) {
  World w = {{"zeta", {3, 1}}, {"alpha", {}}, {"user@10.0.0.1", {0, 1, 2, 3, 4, 5, 6, 7}}};
  EXPECT_EQ(decode_world_info(encode_world_info(w)), w);
}

TEST(WorldInfo, LenientDecoding) {
  // Compact JSON, no padding, standard alphabet.
  EXPECT_EQ(decode_world_info(base64_urlsafe_encode("{\"h\":[0,2]}")), (World{{"h", {0, 2}}}));
  EXPECT_EQ(decode_world_info("eyJ3b3JrZXItMCI6IFswLCAxXSwgIndvcmtlci0xIjogWzJdfQ"),
            (World{{"worker-0", {0, 1}}, {"worker-1", {2}}}));
}

TEST(WorldInfo, Base64AllLengths) {
  std::string bytes;
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(base64_urlsafe_decode(base64_urlsafe_encode(bytes)), bytes);
    bytes += static_cast<char>(i * 37 + 200);
  }
  EXPECT_EQ(base64_urlsafe_encode("\xfb\xff"), "-_8=");
}

TEST(WorldInfo, BadInputIsAClearError) {
  for (const char* bad : {"None", "", "!!!!", "e30x"}) {
    EXPECT_THROW(decode_world_info(bad), dsx::Error) << bad;
  }
  for (const char* json : {"[1]", "{\"a\": [1,}", "{\"a\": [x]}", "{\"a\": [1], \"a\": [2]}", "{\"a\": [1]} trailing"}) {
    EXPECT_THROW(decode_world_info(base64_urlsafe_encode(json)), dsx::Error) << json;
  }
}
