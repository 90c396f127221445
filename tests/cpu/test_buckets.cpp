// The gradient buckets of DistributedDataParallel and DataParallel (et/nn/buckets.hpp):
// host bookkeeping, so it is tested here, without NCCL or a GPU.
#include <et/nn/buckets.hpp>

#include <catch2/catch.hpp>

#include <optional>
#include <vector>

using et::nn::detail::GradientBuckets;

TEST_CASE("GradientBuckets: parameters in reverse order, grouped up to the bucket size", "[buckets]") {
  const GradientBuckets one({4, 4, 4, 4}, 1e9, 1, "DDP");
  CHECK(one.members() == std::vector<std::vector<std::size_t>>{{3, 2, 1, 0}});
  const GradientBuckets apart({4, 4, 4, 4}, 1, 1, "DDP");  // smaller than any parameter: one each
  CHECK(apart.members() == std::vector<std::vector<std::size_t>>{{3}, {2}, {1}, {0}});
  const GradientBuckets pairs({4, 4, 10, 4, 4}, 8, 1, "DDP");
  CHECK(pairs.members() == std::vector<std::vector<std::size_t>>{{4, 3}, {2}, {1, 0}});
  CHECK_THROWS_WITH(GradientBuckets({4}, 0, 1, "DataParallel"), Catch::Contains("et: DataParallel: bucket_mb must be > 0"));
}

TEST_CASE("GradientBuckets: a bucket is ready when every replica completed it", "[buckets]") {
  GradientBuckets b({4, 4, 4}, 8, 2, "DataParallel");  // buckets {2, 1} and {0}
  CHECK_FALSE(b.complete(1, 2).has_value());
  CHECK_FALSE(b.complete(1, 1).has_value());
  CHECK_FALSE(b.complete(0, 1).has_value());
  CHECK(b.complete(0, 2) == std::optional<std::size_t>(0));
  CHECK_THROWS_WITH(b.complete(0, 2), Catch::Contains("parameter 2 of replica 0 got its gradient twice"));
  CHECK_FALSE(b.launched_last());
  CHECK_FALSE(b.complete(0, 0).has_value());
  CHECK(b.complete(1, 0) == std::optional<std::size_t>(1));
  CHECK(b.launched_last());  // the counts start over
  b.check_finished();        // nothing pending: no error
  CHECK_FALSE(b.complete(0, 0).has_value());
}

TEST_CASE("GradientBuckets: parameters a backward left out are named, then forgotten", "[buckets][errors]") {
  GradientBuckets b({4, 4, 4}, 1, 2, "DataParallel");
  (void)b.complete(0, 1);
  (void)b.complete(1, 1);
  (void)b.complete(0, 2);
  CHECK_THROWS_WITH(b.check_finished(), Catch::Contains("no gradient to parameter(s) 0, 2") &&
                                            Catch::Contains("on every GPU"));
  b.check_finished();  // the error reset the counts
  GradientBuckets ddp({4, 4}, 1, 1, "DistributedDataParallel");
  (void)ddp.complete(0, 1);
  CHECK_THROWS_WITH(ddp.check_finished(), Catch::Equals("et: DistributedDataParallel: the last backward gave no "
                                                        "gradient to parameter(s) 0 (in parameters() order), so "
                                                        "their buckets were never reduced; every parameter must "
                                                        "take part in every backward"));
}
