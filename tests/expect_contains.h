// EXPECT_CONTAINS(text, part): `part` occurs in `text`, the check most tests of messages and
// command output make; a failure prints the whole text.
#pragma once

#include <gtest/gtest.h>

#include <string>

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)
