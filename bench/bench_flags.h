// A benchmark program's inputs: its flags (boost::program_options), parsed or the reason it
// stops first, and the JSON file its peers script wrote.
#pragma once

#include <rapidjson/document.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace dsx::bench {

// Parses argv into `vars`. Returns the exit code when the program should stop: 2 after a bad
// flag (the message goes to stderr, after `program`), 0 after printing --help; nullopt to run.
inline std::optional<int> parse_bench_flags(int argc, char** argv,
                                            const boost::program_options::options_description& flags,
                                            boost::program_options::variables_map& vars,
                                            const char* program) {
  namespace po = boost::program_options;
  try {
    po::store(po::parse_command_line(argc, argv, flags), vars);
    po::notify(vars);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
  if (vars.count("help")) {
    std::printf("%s", (std::stringstream() << flags).str().c_str());
    return 0;
  }
  return std::nullopt;
}

// The JSON a peers script wrote (bench/*/..._peers.py); not an object when the file is missing
// or is not JSON, for the caller to say so and go on without the peers.
inline rapidjson::Document read_peers_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document doc;
  if (doc.Parse(text.str().c_str()).HasParseError()) doc.SetNull();
  return doc;
}

}  // namespace dsx::bench
