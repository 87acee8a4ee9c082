// Admitting and removing jobs at run time never disturbs the running jobs' entries: under the
// static policy a new job gets aggregators nobody holds, or is refused.
#include <gtest/gtest.h>

#include "control/slice_allocator.h"
#include "daemons/switch_daemon.h"

namespace atp::control {
namespace {

TEST(SliceAllocator, HandsOutFreeRunsFirstFitAndNeverOverlaps) {
  SliceAllocator a(64);
  a.reserve(1, {0, 16});
  a.reserve(2, {32, 16});
  EXPECT_THROW(a.reserve(3, {40, 16}), std::invalid_argument);  // overlaps job 2's
  EXPECT_THROW(a.reserve(3, {60, 8}), std::invalid_argument);   // beyond the pool
  auto s = a.allocate(3, 16);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first, 16u);  // the gap between jobs 1 and 2
  EXPECT_FALSE(a.allocate(4, 32));  // 16 free in one run only
  EXPECT_FALSE(a.allocate(3, 40));  // refused: job 3 keeps the slice it held
  EXPECT_EQ(a.slice_of(3)->first, 16u);
  EXPECT_EQ(a.free_aggregators(), 16u);
  EXPECT_EQ(a.largest_free_run(), 16u);
  a.release(2);
  s = a.allocate(4, 32);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first, 32u);
  EXPECT_EQ(a.slice_of(1)->first, 0u);
}

std::string cluster_text(const std::vector<std::uint32_t>& jobs) {
  std::string s =
      "[[switch]]\nname = \"rack0\"\naddress = \"127.0.0.1:0\"\naggregators = 64\n"
      "policy = \"static\"\n[[ps]]\nname = \"ps\"\naddress = \"127.0.0.1:9\"\n";
  for (std::uint32_t id : jobs)
    s += "[[job]]\nid = " + std::to_string(id) + "\nparameter_servers = [\"ps\"]\nworkers = [" +
         "{ rack = \"rack0\", address = \"127.0.0.1:" + std::to_string(1000 + 2 * id) + "\" }," +
         "{ rack = \"rack0\", address = \"127.0.0.1:" + std::to_string(1001 + 2 * id) + "\" }]\n";
  return s;
}

// Before the allocator, `atp ctl admit` re-derived job 3's slice from the edited file: a third
// of the pool at 42, inside job 2's [32, 64).
TEST(Admission, AStaticJobAdmittedLaterGetsFreeAggregatorsOrIsRefused) {
  daemons::SwitchDaemon sw(ClusterConfig::parse(cluster_text({1, 2})), "rack0");
  ASSERT_EQ(sw.static_slice(1)->first, 0u);
  ASSERT_EQ(sw.static_slice(2)->first, 32u);
  try {
    sw.admit(ClusterConfig::parse(cluster_text({1, 2, 3})), 3);
    FAIL() << "admitted into a full pool";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("no free run of 21 aggregators"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(sw.job_ids().size(), 2u);
  EXPECT_EQ(sw.static_slice(2)->first, 32u);
  EXPECT_EQ(sw.static_slice(2)->count, 32u);

  ASSERT_TRUE(sw.remove_job(2));
  EXPECT_FALSE(sw.static_slice(2));
  sw.admit(ClusterConfig::parse(cluster_text({1, 2, 3})), 3);  // 21 fit where job 2 was
  EXPECT_EQ(sw.static_slice(3)->first, 32u);
  EXPECT_EQ(sw.static_slice(3)->count, 21u);
  EXPECT_EQ(sw.static_slice(1)->first, 0u);  // untouched throughout
  EXPECT_EQ(sw.static_slice(1)->count, 32u);
  // Admitting a running job again (an edited file) keeps it within free space too.
  sw.admit(ClusterConfig::parse(cluster_text({1, 3})), 3);
  EXPECT_EQ(sw.static_slice(3)->first, 32u);
  EXPECT_EQ(sw.static_slice(3)->count, 32u);
}

}  // namespace
}  // namespace atp::control
