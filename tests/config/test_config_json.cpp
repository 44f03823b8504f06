// The JSON layer of the config reader: positions, Hjson-style comments, trailing commas,
// duplicate keys, depth limit, bad bytes, and the messages each gives.
#include "config/json.h"
#include "tests/config/config_test_util.h"

using namespace dsx::test;
namespace json = dsx::config::json;

namespace {
std::string parse_error(const std::string& text) {
  return error_of([&] { json::parse(text, "f.json"); });
}
}  // namespace

TEST(ConfigJson, ValuesKnowTheirLineAndColumn) {
  auto v = json::parse("{\n  \"a\": 1,\n  \"b\": {\"c\": [true, \"x\\\"y\", null]}\n}", "f.json");
  ASSERT_EQ(v.members.size(), 2u);
  EXPECT_EQ(v.members[0].key_pos.line, 2);
  EXPECT_EQ(v.members[0].key_pos.column, 3);
  EXPECT_EQ(v.members[0].value.pos.column, 8);
  const json::Value* c = v.find("b")->find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->pos.line, 3);
  EXPECT_EQ(c->pos.column, 14);
  EXPECT_EQ(c->items[1].text, "x\"y");
  EXPECT_EQ(c->items[1].pos.column, 21);
  EXPECT_EQ(c->items[2].pos.column, 29);
}

TEST(ConfigJson, ColumnsCountCharactersNotBytes) {
  auto v = json::parse("{\"é\": \"ü\", \"k\": 2}", "f.json");
  EXPECT_EQ(v.members[1].key_pos.column, 12);
}

TEST(ConfigJson, NumbersKeepTheirText) {
  auto v = json::parse(R"({"a": 5e8, "b": 500000000, "c": -1.50})", "f.json");
  EXPECT_EQ(v.find("a")->text, "5e8");
  EXPECT_DOUBLE_EQ(v.find("a")->number, 5e8);
  EXPECT_EQ(v.find("b")->text, "500000000");
  EXPECT_EQ(v.find("c")->text, "-1.50");
}

TEST(ConfigJson, CommentsAndTrailingCommasAreAccepted) {
  auto v = json::parse("# hash\n{ // line\n \"a\": [1, 2,], /* block # not a comment end */ \"b\": \"#x\", }\n",
                       "f.json");
  EXPECT_EQ(v.find("a")->items.size(), 2u);
  EXPECT_EQ(v.find("b")->text, "#x");
  EXPECT_EQ(v.find("b")->pos.line, 3);
}

TEST(ConfigJson, SyntaxErrorsSayWhere) {
  auto e = parse_error("{\n  \"a\": 1\n  \"b\": 2\n}");
  EXPECT_CONTAINS(e, "f.json:3:3: invalid JSON");
  EXPECT_CONTAINS(e, "comma");
  EXPECT_CONTAINS(parse_error("{\"a\": tru}"), "f.json:1:");
  EXPECT_CONTAINS(parse_error(""), "invalid JSON");
  EXPECT_CONTAINS(parse_error("{'a': 1}"), "double quotes");
}

TEST(ConfigJson, DuplicateKeysAreAllNamed) {
  auto e = parse_error("{\"a\": 1, \"b\": {\"x\": 1, \"x\": 2}, \"a\": 3}");
  EXPECT_CONTAINS(e, "Duplicate keys in DeepSpeed config: ['x', 'a']");
}

TEST(ConfigJson, DeepNestingIsRefused) {
  std::string deep(100000, '[');
  EXPECT_CONTAINS(parse_error(deep), "nested more than 64 levels");
  std::string ok = "{\"a\":" + std::string(60, '[') + std::string(60, ']') + "}";
  EXPECT_NO_THROW(json::parse(ok, "f.json"));
}

TEST(ConfigJson, BadBytesAreRefused) {
  EXPECT_CONTAINS(parse_error(std::string("{\"a\": \"\xff\xfe\"}")), "invalid JSON");
  EXPECT_CONTAINS(parse_error(std::string("{\"a\": 1}\0{", 10)), "NUL byte");
}

TEST(ConfigJson, TheRootMustBeAnObject) {
  EXPECT_CONTAINS(parse_error("[1, 2]"), "a ds_config is a JSON object");
  EXPECT_CONTAINS(parse_error("\"text\""), "found a string");
}

TEST(ConfigJson, SerialisesBack) {
  auto v = json::parse(R"({"a": [1, 2.5e3, "q\"uote"], "b": null, "c": {"d": false}})", "f.json");
  EXPECT_EQ(json::to_string(v), R"({"a":[1,2.5e3,"q\"uote"],"b":null,"c":{"d":false}})");
}

TEST(ConfigJson, LargeMinifiedFilesStayLinear) {
  // 50000 keys on one line: positions and duplicate checks must not go quadratic.
  std::string text = "{\"pipeline\": {";
  for (int i = 0; i < 50000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": [1, \"v\"]";
  text += "}}";
  auto v = json::parse(text, "f.json");
  const json::Value* block = v.find("pipeline");
  ASSERT_NE(block, nullptr);
  ASSERT_EQ(block->members.size(), 50000u);
  EXPECT_EQ(block->members.back().key, "k49999");
  EXPECT_EQ(block->members[1].key_pos.column, 30);
  EXPECT_CONTAINS(parse_error(text.substr(0, text.size() - 2) + ", \"k7\": 0}}"), "['k7']");
}
