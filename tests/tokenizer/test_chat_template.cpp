// A folder's chat template: chat_template.jinja before tokenizer_config.json's chat_template, the
// list form's "default", the special tokens the template sees, and errors that name the file; and
// the stop ids of its generation_config.json.
#include <gtest/gtest.h>

#include "dsx/error.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/generation_config.h"

using namespace dsx::tokenizer;
using testing_util::TempDir;
namespace jinja = dsx::jinja;

namespace {

jinja::List one_message(const std::string& role, const std::string& content) {
  jinja::Dict m;
  m.set("role", role);
  m.set("content", content);
  return {jinja::Value(m)};
}

std::string error_of(const std::string& folder) {
  try {
    auto chat = read_chat_template(folder);
    if (chat) chat->render(one_message("user", "hi"), true);
  } catch (const dsx::Error& e) {
    return e.what();
  }
  return "no error";
}

const char* kConfig = R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": )";

}  // namespace

TEST(ChatTemplate, ConfigTemplateSeesMessagesSpecialTokensAndGenerationPrompt) {
  TempDir dir;
  dir.write("tokenizer_config.json",
            std::string(kConfig) +
                R"("{{ bos_token }}{% for m in messages %}[{{ m.role }}: {{ m.content }}]{% endfor %})"
                R"({% if add_generation_prompt %}[assistant:{% endif %}{{ eos_token }}"})");
  auto chat = read_chat_template(dir.path());
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->render(one_message("user", "hi"), true).text, "<s>[user: hi][assistant:</s>");
  EXPECT_EQ(chat->render(one_message("user", "hi"), false).text, "<s>[user: hi]</s>");
  EXPECT_FALSE(chat->marks_generation());
  // A tokenizer file's path finds its folder's template too.
  EXPECT_TRUE(read_chat_template(dir.file("tokenizer.json")));
}

TEST(ChatTemplate, JinjaFileWinsOverTheConfig) {
  TempDir dir;
  dir.write("tokenizer_config.json", std::string(kConfig) + R"("from the config"})");
  dir.write("chat_template.jinja", "{% generation %}from the file{% endgeneration %}");
  auto chat = read_chat_template(dir.path());
  ASSERT_TRUE(chat);
  auto rendered = chat->render({}, false);
  EXPECT_EQ(rendered.text, "from the file");
  EXPECT_TRUE(chat->marks_generation());
  ASSERT_EQ(rendered.generation.size(), 1u);
  EXPECT_EQ(rendered.generation[0], std::make_pair(size_t{0}, size_t{13}));
  EXPECT_NE(chat->origin().find("chat_template.jinja"), std::string::npos);
}

TEST(ChatTemplate, NamedTemplatesPickDefault) {
  TempDir dir;
  dir.write("tokenizer_config.json",
            std::string(kConfig) +
                R"([{"name": "tool_use", "template": "tools"}, {"name": "default", "template": "plain"}]})");
  auto chat = read_chat_template(dir.path());
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->render({}, false).text, "plain");
}

TEST(ChatTemplate, NoTemplateIsNone) {
  TempDir dir;
  EXPECT_FALSE(read_chat_template(dir.path()));  // no tokenizer_config.json at all
  dir.write("tokenizer_config.json", R"({"eos_token": "</s>", "chat_template": null})");
  EXPECT_FALSE(read_chat_template(dir.path()));
}

TEST(ChatTemplate, ErrorsNameTheFileAndWhat) {
  struct Case {
    std::string config_template, jinja_file, expected;
  } cases[] = {
      {R"([{"name": "tool_use", "template": "x"}, {"name": "rag", "template": "y"}])", "",
       "lists templates named tool_use, rag but none named \"default\""},
      {"3", "", "chat_template"},
      {R"([{"template": "x"}])", "", "name"},
      {R"("{% for m in messages %}")", "", "tokenizer_config.json (chat_template): line 1"},
      {R"("ok")", "a\n{{ 1 + }}", "chat_template.jinja: line 2"},
      {R"("{{ raise_exception('Conversation roles must alternate') }}")", "",
       "raise_exception: Conversation roles must alternate"},
      {R"("{% include 'other.jinja' %}")", "", "include"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    dir.write("tokenizer_config.json", std::string(kConfig) + c.config_template + "}");
    if (!c.jinja_file.empty()) dir.write("chat_template.jinja", c.jinja_file);
    const std::string error = error_of(dir.path());
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.config_template << " -> " << error;
    EXPECT_NE(error.find(dir.path()), std::string::npos) << error;
  }
}

TEST(GenerationConfig, StopIdsAreEosTokenIdOneOrMany) {
  TempDir dir;
  EXPECT_TRUE(generation_stop_ids(dir.path()).empty());  // no file
  dir.write("generation_config.json", R"({"bos_token_id": 1, "eos_token_id": [128001, 128009]})");
  EXPECT_EQ(generation_stop_ids(dir.path()), (std::vector<int32_t>{128001, 128009}));
  dir.write("generation_config.json", R"({"eos_token_id": 2})");
  EXPECT_EQ(generation_stop_ids(dir.path()), (std::vector<int32_t>{2}));
  dir.write("generation_config.json", R"({"do_sample": true})");
  EXPECT_TRUE(generation_stop_ids(dir.path()).empty());
  dir.write("generation_config.json", R"({"eos_token_id": "</s>"})");
  try {
    generation_stop_ids(dir.path());
    ADD_FAILURE() << "a string eos_token_id was taken";
  } catch (const dsx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("eos_token_id"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
  }
}
