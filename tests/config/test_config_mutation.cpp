// The reader never crashes, aborts or hangs on bad input: thousands of mutated configs
// (truncations, deleted and inserted bytes, type swaps, huge numbers, deep nesting, invalid
// UTF-8) each end in a dsx::Error or in a valid config that can be listed. In-process and
// deterministic (fixed seed), so a failure can be replayed.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/config/config_test_util.h"

namespace {

std::vector<std::string> seed_configs() {
  std::vector<std::string> seeds;
  for (const char* dir : {"/configs", "/tests/config/configs"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::string(DSX_SOURCE_DIR) + dir)) {
      if (entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      seeds.push_back(text.str());
    }
  }
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint32_t seed) : rng_(seed) {}

  std::string mutate(std::string s) {
    if (s.empty()) return s;
    switch (pick(8)) {
      case 0: return s.substr(0, pick(s.size()));  // truncation
      case 1: {                                    // delete a range
        size_t at = pick(s.size());
        return s.erase(at, 1 + pick(std::min<size_t>(16, s.size() - at)));
      }
      case 2: {  // insert a troublesome byte sequence
        static const char* const kBits[] = {"\xff", "\xc3", "\xed\xa0\x80", "{", "[", "\"", ",", ":", "}", "]",
                                            "\\", "/*", "//", "#", "\n", "auto", "\"auto\"", std::string(1, '\0').c_str()};
        std::string bit = pick(18) == 17 ? std::string(1, '\0') : kBits[pick(17)];
        return s.insert(pick(s.size()), bit);
      }
      case 3: return swap_value(s);
      case 4: {  // duplicate a line
        size_t a = s.rfind('\n', pick(s.size()));
        a = a == std::string::npos ? 0 : a + 1;
        size_t b = s.find('\n', a);
        if (b == std::string::npos) return s;
        return s.insert(a, s.substr(a, b - a + 1));
      }
      case 5: {  // deep nesting
        size_t at = pick(s.size());
        return s.insert(at, std::string(pick(4) == 0 ? 100000 : 70, pick(2) ? '[' : '{'));
      }
      case 6: {  // swap two bytes
        std::swap(s[pick(s.size())], s[pick(s.size())]);
        return s;
      }
      default: {  // flip a bit
        s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
        return s;
      }
    }
  }

 private:
  size_t pick(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  // Replaces the value after a random ':' with a value of another type or a huge number.
  std::string swap_value(std::string s) {
    static const char* const kValues[] = {"\"text\"", "true", "null", "[]", "{}", "1e400", "-1", "0",
                                          "99999999999999999999999", "0.5", "-9223372036854775808",
                                          "9223372036854775807", "1e30", "\"5e8\"", "[1,[2,[3]]]", "\"auto\"",
                                          "-0.0", "\"\\u0000\"", "2.5e-320"};
    size_t colon = s.find(':', pick(s.size()));
    if (colon == std::string::npos) return s;
    size_t end = s.find_first_of(",}\n", colon + 1);
    if (end == std::string::npos) end = s.size();
    return s.replace(colon + 1, end - colon - 1, kValues[pick(19)]);
  }

  std::mt19937 rng_;
};

}  // namespace

TEST(ConfigMutation, EveryMutantIsAnErrorOrAValidConfig) {
  const auto seeds = seed_configs();
  ASSERT_GE(seeds.size(), 20u);
  Mutator mutator(20260601);
  std::mt19937 rng(7);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 6000; ++i) {
    std::string text = seeds[i % seeds.size()];
    for (int k = 0, rounds = 1 + i % 3; k < rounds; ++k) text = mutator.mutate(text);
    dsx::config::ConfigInputs in;
    in.world_size = 1 + static_cast<int64_t>(rng() % 8);
    if (rng() % 2) in.hidden_size = 1 + static_cast<int64_t>(rng() % 8192);
    if (rng() % 3 == 0) in.micro_batch = 1 + static_cast<int64_t>(rng() % 16);
    in.strict = rng() % 5 == 0;
    const auto start = std::chrono::steady_clock::now();
    try {
      auto config = dsx::config::read_ds_config_text(text, "mutant.json", in);
      auto flat = dsx::config::flatten(config);
      ASSERT_FALSE(flat.empty());
      EXPECT_GT(config.train_batch_size, 0);
      ++accepted;
    } catch (const dsx::Error& e) {
      ASSERT_NE(e.kind(), dsx::ErrorKind::Internal) << e.what();
      ASSERT_GT(std::string(e.what()).size(), 10u);
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "mutant " << i << " threw a non-dsx exception: " << e.what() << "\n" << text.substr(0, 400);
    }
    // Not a speed test: a bound far above the microseconds a mutant takes, to catch runaway work.
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_LT(seconds, 5.0) << "mutant " << i << " took " << seconds << " s:\n" << text.substr(0, 400);
  }
  // Both outcomes must occur, or the mutations are not exercising the reader.
  EXPECT_GT(accepted, 300);
  EXPECT_GT(rejected, 1000);
  std::cout << "mutants: " << accepted << " accepted, " << rejected << " rejected with an error\n";
}
