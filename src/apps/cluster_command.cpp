// `atp cluster`: the emulated cluster and its benchmarks. Building namespaces and driving
// processes is the Python package's job (python/atp/cluster.py); this hands it the command
// line, with the package and this very `atp` binary found next to each other.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "apps/commands.h"

namespace atp::apps {

void add_cluster_command(CLI::App& app) {
  auto* cluster = app.add_subcommand(
      "cluster", "Emulated cluster in network namespaces; benchmarks against Gloo, PS, static "
                 "(`atp cluster --help`)");
  cluster->prefix_command();
  cluster->set_help_flag();  // --help goes to the Python side, which knows the options
  cluster->callback([cluster] {
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
    const std::string package = (self.parent_path().parent_path() / "python").string();
    const char* old = std::getenv("PYTHONPATH");
    const std::string path = old && *old ? package + ":" + old : package;
    ::setenv("PYTHONPATH", path.c_str(), 1);
    ::setenv("ATP_BIN", self.c_str(), 0);
    std::vector<std::string> args = {"/usr/bin/python3", "-m", "atp.cluster"};
    for (const auto& a : cluster->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::cerr << "atp cluster: cannot run /usr/bin/python3: " << std::strerror(errno) << "\n";
    set_exit_code(2);
  });
}

}  // namespace atp::apps
