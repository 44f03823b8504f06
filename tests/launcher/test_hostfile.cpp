// Hostfile grammar and errors (ref/launcher.md section 2), including DeepSpeed's unit-test vectors.
#include <gtest/gtest.h>

#include <fstream>

#include "dsx/error.h"
#include "launcher/hostfile.h"

using dsx::launcher::HostfileEntry;
using dsx::launcher::parse_hostfile;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_hostfile(text, "hf");
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Hostfile, DeepSpeedGoodVector) {
  std::string text =
      "\n"
      "worker-1 slots=2\n"
      "    worker-2 slots=2\n"
      "\n"
      "localhost slots=1\n"
      "123.23.12.10 slots=2\n"
      "#worker-3 slots=4\n"
      "# a comment\n";
  auto entries = parse_hostfile(text, "hf");
  std::vector<HostfileEntry> want = {{"worker-1", 2, 2}, {"worker-2", 2, 3}, {"localhost", 1, 5}, {"123.23.12.10", 2, 6}};
  EXPECT_EQ(entries, want);
}

TEST(Hostfile, TrailingTextAndUserHostAccepted) {
  auto entries = parse_hostfile("ubuntu@node-a slots=4 max_slots=8\r\nnode-b\tslots=0  # no gpus\n", "hf");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].host, "ubuntu@node-a");
  EXPECT_EQ(entries[0].slots, 4);
  EXPECT_EQ(entries[1].host, "node-b");
  EXPECT_EQ(entries[1].slots, 0);
}

TEST(Hostfile, BadEntriesNameFileAndLine) {
  for (const char* bad : {"host", "host slot=2", "host slots=-1", "host slots= 2", "this is bad slots=1", "missingslots",
                          "host slots=x", "host 4"}) {
    std::string text = std::string("good slots=1\n") + bad + "\n";
    std::string err = error_of(text);
    EXPECT_NE(err.find("hf:2: Hostfile contains a bad entry: "), std::string::npos) << bad << " -> " << err;
    EXPECT_NE(err.find("unable to proceed with launching"), std::string::npos) << err;
  }
}

TEST(Hostfile, DuplicateHostNamesBothLines) {
  std::string err = error_of("worker-0 slots=2\n\nworker-0 slots=4\n");
  EXPECT_NE(err.find("hf:3: Hostfile contains multiple entries for worker-0"), std::string::npos) << err;
  EXPECT_NE(err.find("line 1"), std::string::npos) << err;
}

TEST(Hostfile, EmptyOrWhitespaceOrCommentsOnly) {
  for (const char* text : {"", "   \n\t\n", "# only a comment\n"}) {
    EXPECT_NE(error_of(text).find("Hostfile is empty or not formatted correctly"), std::string::npos) << text;
  }
}

TEST(Hostfile, MixOfGoodAndBadIsAnError) {
  EXPECT_NE(error_of("a slots=1\nb slots=2\nc slots\nd slots=1\n").find("hf:3:"), std::string::npos);
}

TEST(Hostfile, HugeSlotCountIsRejectedNotOverflowed) {
  EXPECT_NE(error_of("a slots=99999999999999999999\n").find("too large"), std::string::npos);
}

TEST(Hostfile, MissingFileMeansLocal) {
  EXPECT_FALSE(dsx::launcher::read_hostfile("/nonexistent/dsx/hostfile").has_value());
}

TEST(Hostfile, DirectoryIsRefusedNotLocal) {
  // issue 33 item 19: `-H somedir` used to launch locally without a word.
  try {
    dsx::launcher::read_hostfile("/tmp");
    ADD_FAILURE() << "a directory was accepted as a missing hostfile";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("hostfile /tmp is a directory"), std::string::npos) << e.what();
  }
}

TEST(Hostfile, HugeSlotCountIsReportedAsWritten) {
  std::string err = error_of("a slots=1\nb slots=99999999999\n");
  EXPECT_NE(err.find("hf:2: slots=99999999999 is too large"), std::string::npos) << err;
}

TEST(Hostfile, FractionalOrSuffixedSlotsAreRefused) {
  for (const char* bad : {"2.5", "2x", "4,5"}) {
    std::string err = error_of(std::string("a slots=1\nb slots=") + bad + " max_slots=8\n");
    EXPECT_NE(err.find(std::string("hf:2: slots=") + bad + " is not a whole number"), std::string::npos) << err;
  }
  EXPECT_EQ(parse_hostfile("a slots=007\n", "hf")[0].slots, 7);
}

TEST(Hostfile, ByteOrderMarkIsNotPartOfTheHostName) {
  auto entries = parse_hostfile("\xEF\xBB\xBFworker-0 slots=2\nworker-1 slots=2\n", "hf");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].host, "worker-0");
  EXPECT_EQ(entries[0].line, 1);
}

TEST(Hostfile, ReadsFromDisk) {
  std::string path = testing::TempDir() + "/dsx_hostfile_test";
  std::ofstream(path) << "a slots=2\nb slots=3\n";
  auto entries = dsx::launcher::read_hostfile(path);
  ASSERT_TRUE(entries.has_value());
  EXPECT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[1].slots, 3);
  std::remove(path.c_str());
}
