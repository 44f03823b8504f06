// Entry point of `dsx`: finds the subcommand and runs it; turns every dsx::Error into one clear
// line on stderr and a non-zero exit code: 2 for usage errors, 3 when out of memory (so that
// `dsx autotune` tells a trial that did not fit from one that broke), 1 for the rest.
#include <cstring>
#include <exception>
#include <new>
#include <iostream>
#include <string>

#include "dsx/error.h"
#include "kernels/cpu/blas_kernels.h"
#include "kernels/cpu/omp_threads.h"
#include "tools/command.h"

namespace {

void print_help(std::ostream& out) {
  out << "dsx: train with DeepSpeed's ds_config, ZeRO 0-3, on CPUs (libfabric) or GPUs (NCCL)\n\n"
         "usage: dsx <command> [options]     dsx <command> --help for a command's options\n\n"
         "commands:\n";
  for (const auto& cmd : dsx::tools::commands()) {
    out << "  " << cmd.name << std::string(12 - std::min<size_t>(11, std::strlen(cmd.name)), ' ')
        << cmd.summary << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  dsx::kernels::cpu::clamp_omp_threads(argv);
  dsx::kernels::cpu::run_on_the_best_blas_kernels(argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    print_help(std::cout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version")) argv[1] = const_cast<char*>("version");
  for (const auto& cmd : dsx::tools::commands()) {
    if (std::strcmp(cmd.name, argv[1]) != 0) continue;
    std::string prog = std::string("dsx ") + cmd.name;
    argv[1] = prog.data();
    try {
      return cmd.run(argc - 1, argv + 1);
    } catch (const dsx::Error& e) {
      std::cerr << "dsx: " << to_string(e.kind()) << " error: " << e.what() << "\n";
      if (e.kind() == dsx::ErrorKind::Usage) return 2;
      return e.kind() == dsx::ErrorKind::OutOfMemory ? 3 : 1;
    } catch (const std::bad_alloc&) {
      std::cerr << "dsx: out_of_memory error: the host ran out of memory; use a higher ZeRO stage, more ranks, "
                   "a smaller micro-batch or activation checkpointing\n";
      return 3;
    } catch (const std::exception& e) {
      std::cerr << "dsx: internal error: " << e.what() << "\n"
                << "This is a bug in dsx; please report it with the command you ran.\n";
      return 1;
    }
  }
  std::cerr << "dsx: unknown command '" << argv[1] << "'\n\n";
  print_help(std::cerr);
  return 2;
}
