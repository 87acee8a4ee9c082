// runtime::Bmv2Cli against a stand-in for simple_switch_CLI (a shell script with its prompt and
// answers): answers are what came before the next prompt, the switch's refusals and a CLI that
// exits or hangs are errors, never a wait without end.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "runtime/bfrt_shell.h"
#include "runtime/bmv2_cli.h"
#include "runtime/event_loop.h"

namespace atp::runtime {
namespace {

// Port 1 plays a switch that is not there; "hang" a switch that stops answering.
constexpr const char* kFakeCli = R"(#!/bin/sh
[ "$2" = "1" ] && { echo "Could not connect to thrift client on port 1"; exit 1; }
printf 'Obtaining JSON from switch...\nDone\nControl utility for runtime P4 table manipulation\nRuntimeCmd: '
while read -r line; do
  case "$line" in
    dup*) printf 'Adding entry to exact match table t\nInvalid table operation (DUPLICATE_ENTRY)\nRuntimeCmd: ' ;;
    hang*) sleep 10 ;;
    quit*) exit 0 ;;
    *) printf 'did %s\nEntry has been added with handle 3\nRuntimeCmd: ' "$line" ;;
  esac
done
)";

class Bmv2CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "fake_simple_switch_CLI_" + std::to_string(::getpid());
    std::ofstream(path_) << kFakeCli;
    ::chmod(path_.c_str(), 0755);
  }
  void TearDown() override { ::unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(Bmv2CliTest, AnAnswerIsWhatTheCliPrintedBeforeItsNextPrompt) {
  Bmv2Cli cli(path_, 9090);
  EXPECT_EQ(cli.run("table_add t a 1 => 2"), "did table_add t a 1 => 2\nEntry has been added with handle 3\n");
  EXPECT_EQ(cli.run("second"), "did second\nEntry has been added with handle 3\n");
}

TEST_F(Bmv2CliTest, ARefusalIsAnErrorNamingTheCommandAndTheReason) {
  Bmv2Cli cli(path_, 9090);
  try {
    cli.run("dup t a 1");
    FAIL() << "no error";
  } catch (const SwitchCliError& e) {
    EXPECT_NE(std::string(e.what()).find("'dup t a 1'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("DUPLICATE_ENTRY"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(cli.run("after"));  // the session goes on
  EXPECT_THROW(cli.run("two\nlines"), SwitchCliError);
}

TEST_F(Bmv2CliTest, NoSwitchACliThatExitsOrOneThatHangsIsAnError) {
  try {
    Bmv2Cli absent(path_, 1);
    FAIL() << "no error";
  } catch (const SwitchCliError& e) {
    EXPECT_NE(std::string(e.what()).find("Could not connect"), std::string::npos) << e.what();
  }
  Bmv2Cli hangs(path_, 9090, 200 * kMillisecond);
  const Time before = monotonic_now();
  EXPECT_THROW(hangs.run("hang"), SwitchCliError);
  EXPECT_LT(monotonic_now() - before, 5 * kSecond);
  EXPECT_THROW(Bmv2Cli(path_ + ".missing", 9090), SwitchCliError);
}

// The next command goes to a new CLI, and gets its own answer: the old one's late answer would
// otherwise be read as the next command's.
TEST_F(Bmv2CliTest, ACliThatHungOrExitedIsReplacedForTheNextCommand) {
  Bmv2Cli hangs(path_, 9090, 200 * kMillisecond);
  EXPECT_THROW(hangs.run("hang"), SwitchCliError);
  EXPECT_EQ(hangs.run("next"), "did next\nEntry has been added with handle 3\n");
  Bmv2Cli exits(path_, 9090);
  EXPECT_THROW(exits.run("quit"), SwitchCliError);
  EXPECT_EQ(exits.run("after it exited"), "did after it exited\nEntry has been added with handle 3\n");
}

// runtime::BfrtShell runs a stand-in for the SDE's shell: `sh -c CODE`, the script's path its $0.
BfrtShell shell(const std::string& code, Duration budget = BfrtShell::kScriptBudget) {
  return BfrtShell({"/bin/sh", "-c", code}, budget);
}

TEST(BfrtShell, ReturnsWhatTheShellPrintedForTheScript) {
  EXPECT_EQ(shell("echo ran $0").run_script("/tmp/s.py"), "ran /tmp/s.py\n");
}

TEST(BfrtShell, AFailingExitAnErrorLineOrATracebackIsAnError) {
  for (const std::string code : {"echo no such table; exit 3", "echo 'Error: table_add failed'",
                                 "echo 'Traceback (most recent call last):'; echo x"}) {
    try {
      shell(code).run_script("/tmp/s.py");
      ADD_FAILURE() << code;
    } catch (const SwitchCliError& e) {
      EXPECT_NE(std::string(e.what()).find("/tmp/s.py"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(BfrtShell({"/nonexistent/bfshell"}).run_script("/tmp/s.py"), SwitchCliError);
  EXPECT_THROW(BfrtShell({}), std::invalid_argument);
}

TEST(BfrtShell, AShellPastItsBudgetIsStopped) {
  const Time start = monotonic_now();
  EXPECT_THROW(shell("sleep 10", 200 * kMillisecond).run_script("/tmp/s.py"), SwitchCliError);
  EXPECT_LT(monotonic_now() - start, 5 * kSecond);
}

}  // namespace
}  // namespace atp::runtime
