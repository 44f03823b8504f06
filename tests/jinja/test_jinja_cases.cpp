// dsx's chat-template renderer against what transformers' Jinja environment rendered for the same
// templates and variables (data/cases.json, made by compat/make_cases.py): the text to the byte,
// the {% generation %} ranges, and an error wherever Jinja raised one.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <fstream>
#include <iterator>
#include <string>

#include "dsx/error.h"
#include "jinja/json_value.h"
#include "jinja/template.h"

namespace dsx::jinja {
namespace {

std::string data_path(const std::string& name) {
  return std::string(DSX_SOURCE_DIR) + "/tests/jinja/data/" + name;
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Case {
  std::string name, template_text, expected, expected_error;
  Dict variables;
  std::vector<std::pair<size_t, size_t>> generation;
};

std::vector<Case> load_cases() {
  rapidjson::Document doc;
  const std::string text = read(data_path("cases.json"));
  doc.Parse(text.c_str(), text.size());
  if (doc.HasParseError() || !doc.IsArray()) throw std::runtime_error("cases.json is not a JSON array");
  std::vector<Case> cases;
  for (const auto& c : doc.GetArray()) {
    Case out;
    out.name = c["name"].GetString();
    out.template_text = c.HasMember("template") ? c["template"].GetString()
                                                : read(data_path("templates/") + c["template_file"].GetString());
    out.variables = from_json(c["variables"]).as_dict();
    if (c.HasMember("error")) {
      out.expected_error = c["error"].GetString();
    } else {
      out.expected = std::string(c["text"].GetString(), c["text"].GetStringLength());
      for (const auto& g : c["generation"].GetArray()) out.generation.emplace_back(g[0].GetUint64(), g[1].GetUint64());
    }
    cases.push_back(std::move(out));
  }
  return cases;
}

class JinjaCase : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaCase, RendersAsTransformersDoes) {
  const Case& c = GetParam();
  const Template t(c.template_text);
  if (!c.expected_error.empty()) {
    try {
      t.render(c.variables);
      FAIL() << "rendered without the error Jinja raised: " << c.expected_error;
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.find("raise_exception: ") != std::string::npos) {
        EXPECT_NE(what.find(c.expected_error), std::string::npos) << what;  // the template's own words
      }
    }
    return;
  }
  const Rendered out = t.render(c.variables);
  EXPECT_EQ(out.text, c.expected);
  EXPECT_EQ(out.generation, c.generation);
}

INSTANTIATE_TEST_SUITE_P(Cases, JinjaCase, ::testing::ValuesIn(load_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name;
                           for (char ch : info.param.name) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(JinjaCases, CoverEveryTemplateFileAndEveryKindOfOutcome) {
  const auto cases = load_cases();
  size_t errors = 0, with_generation = 0, templates = 0;
  for (const auto& c : cases) {
    errors += !c.expected_error.empty();
    with_generation += !c.generation.empty();
    templates += c.name.find('.') != std::string::npos;
  }
  EXPECT_GE(cases.size(), 90u);
  EXPECT_GE(errors, 5u);
  EXPECT_GE(with_generation, 4u);
  EXPECT_GE(templates, 60u);
}

}  // namespace
}  // namespace dsx::jinja
