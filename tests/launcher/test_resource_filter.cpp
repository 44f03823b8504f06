// --include / --exclude at filter level: DeepSpeed's unit-test cases F1-F16 (ref/launcher.md 3.1).
#include <gtest/gtest.h>

#include "dsx/error.h"
#include "launcher/resource_filter.h"

using dsx::launcher::filter_resources;
using dsx::launcher::World;

namespace {

const World H1 = {{"w0", {0, 1, 2, 3}}};
const World H2 = {{"w0", {0, 1, 2, 3}}, {"w1", {0, 1, 2, 3}}};

std::string error_of(const World& hosts, const std::string& inc, const std::string& exc) {
  try {
    filter_resources(hosts, inc, exc);
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(ResourceFilter, NoFilterKeepsEverythingEvenEmptyHosts) {
  EXPECT_EQ(filter_resources(H1, "", ""), H1);                                        // F1
  World with_empty = {{"a", {}}, {"b", {0, 1}}};
  EXPECT_EQ(filter_resources(with_empty, "", ""), with_empty);
}

TEST(ResourceFilter, ExcludeSlots) {
  EXPECT_EQ(filter_resources(H1, "", "w0:1"), (World{{"w0", {0, 2, 3}}}));           // F2
  EXPECT_EQ(filter_resources(H1, "", "w0:1,2"), (World{{"w0", {0, 3}}}));            // F3
  EXPECT_EQ(filter_resources(H2, "", "w0:0,1@w1:3"), (World{{"w0", {2, 3}}, {"w1", {0, 1, 2}}}));  // F12
}

TEST(ResourceFilter, IncludeSlotsSortedAndDeduplicated) {
  EXPECT_EQ(filter_resources(H1, "w0:1", ""), (World{{"w0", {1}}}));                 // F4
  EXPECT_EQ(filter_resources(H1, "w0:1,1", ""), (World{{"w0", {1}}}));               // F5
  EXPECT_EQ(filter_resources(H1, "w0:1@w0:0,1", ""), (World{{"w0", {0, 1}}}));       // F6
  EXPECT_EQ(filter_resources(H2, "w1:0,3", ""), (World{{"w1", {0, 3}}}));            // F10
}

TEST(ResourceFilter, BareHosts) {
  EXPECT_EQ(filter_resources(H1, "w0", ""), H1);                                      // F7
  EXPECT_EQ(filter_resources(H1, "", "w0"), World{});                                 // F8
  EXPECT_EQ(filter_resources(H1, "", "w0:0,1,2,3"), World{});                         // F9
  EXPECT_EQ(filter_resources(H2, "", "w1"), (World{{"w0", {0, 1, 2, 3}}}));          // F11
}

TEST(ResourceFilter, Errors) {
  EXPECT_NE(error_of({}, "A", "B").find("include_str and exclude_str are mutually exclusive"), std::string::npos);  // F13
  EXPECT_NE(error_of(H2, "jeff", "").find("Hostname 'jeff' not found in hostfile"), std::string::npos);           // F14
  EXPECT_NE(error_of(H2, "", "jeff").find("Hostname 'jeff' not found in hostfile"), std::string::npos);
  EXPECT_NE(error_of(H2, "w1:4", "").find("No slot '4' specified on host 'w1'"), std::string::npos);              // F15
  EXPECT_NE(error_of(H2, "", "w1:4").find("No slot '4' specified on host 'w1'"), std::string::npos);
  EXPECT_NE(error_of(H2, "", "w1@w0:1@5").find("Hostname '5' not found"), std::string::npos);                     // F16
}

TEST(ResourceFilter, OrderFollowsHostsNotTheFilter) {
  World h3 = {{"w0", {0, 1}}, {"w1", {0, 1, 2, 3}}, {"w2", {0, 1}}};
  EXPECT_EQ(filter_resources(h3, "w2:1@w0:1", ""), (World{{"w0", {1}}, {"w2", {1}}}));
}
