// et_copy/tensor_layout.h: the dense-strides rule and TensorImplView, on both
// sides of each edge (size 0, size 1, rank 0, rank 16, dim orders that are
// not permutations, strides that overflow; each span of a view's spec one
// item shorter or longer than the rank, and read up to its last item only,
// against a guard page). The reference is ExecuTorch's
// own dim_order_to_stride, which resize_tensor uses, and torch's contiguous
// strides. Touches no registry.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <et_copy/tensor_layout.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/runtime.h>
#include <gtest/gtest.h>

#include "any_rank_tensor_view.h"

namespace {

using et_copy::dense_strides;
using et_copy::TensorImplView;
using executorch::aten::DimOrderType;
using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::runtime::Error;
using executorch::runtime::TensorShapeDynamism;
using executorch::runtime::etensor::DeviceType;

std::vector<DimOrderType> contiguous(size_t rank) {
  std::vector<DimOrderType> order(rank);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// Strides from et_copy's rule, or an empty vector when it refuses.
std::vector<StridesType> ours(const std::vector<SizesType>& sizes, const std::vector<DimOrderType>& order) {
  std::vector<StridesType> strides(sizes.size(), -7);
  if (dense_strides(sizes.data(), order.data(), sizes.size(), strides.data()) != Error::Ok) {
    return {};
  }
  return strides;
}

std::vector<StridesType> executorchs(const std::vector<SizesType>& sizes, const std::vector<DimOrderType>& order) {
  std::vector<StridesType> strides(sizes.size(), -7);
  EXPECT_EQ(executorch::runtime::dim_order_to_stride(sizes.data(), order.data(), sizes.size(), strides.data()),
            Error::Ok);
  return strides;
}

class TensorLayout : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    executorch::runtime::runtime_init();
  }
};

// ---- the size-0 rule: ExecuTorch's and torch's, never a zero stride -----

TEST_F(TensorLayout, SizeZeroDimCountsAsOneLikeTorchContiguousStrides) {
  // torch.empty(2, 0, 3).stride() == (3, 3, 1); torch.empty(2, 3, 0) -> (3, 1, 1);
  // torch.empty(0, 0) -> (1, 1); torch.empty(0) -> (1,).
  EXPECT_EQ(ours({2, 0, 3}, contiguous(3)), (std::vector<StridesType>{3, 3, 1}));
  EXPECT_EQ(ours({2, 3, 0}, contiguous(3)), (std::vector<StridesType>{3, 1, 1}));
  EXPECT_EQ(ours({0, 0}, contiguous(2)), (std::vector<StridesType>{1, 1}));
  EXPECT_EQ(ours({0}, contiguous(1)), (std::vector<StridesType>{1}));
  EXPECT_EQ(ours({0, 5}, contiguous(2)), (std::vector<StridesType>{5, 1}));
}

TEST_F(TensorLayout, SizeOneDimIsAnOrdinaryFactor) {
  // torch.empty(4, 1, 3).stride() == (3, 3, 1); the other side of size 0.
  EXPECT_EQ(ours({4, 1, 3}, contiguous(3)), (std::vector<StridesType>{3, 3, 1}));
  EXPECT_EQ(ours({2, 3, 1}, contiguous(3)), (std::vector<StridesType>{3, 1, 1}));
  EXPECT_EQ(ours({1}, contiguous(1)), (std::vector<StridesType>{1}));
  EXPECT_EQ(ours({2, 2, 3}, contiguous(3)), (std::vector<StridesType>{6, 3, 1}));
}

TEST_F(TensorLayout, SizeZeroInAPermutedOrderFollowsExecuTorchNotTorchChannelsLast) {
  // NCHW sizes [2, 3, 0, 4] in channels-last order: ExecuTorch's rule gives
  // [12, 1, 12, 3]. torch's channels_last strides multiply the raw sizes and
  // give (0, 1, 12, 3); a tensor with no elements reads no memory, and the
  // kernels accept any strides for it, so only the rule's owner matters.
  const std::vector<DimOrderType> nhwc{0, 2, 3, 1};
  EXPECT_EQ(ours({2, 3, 0, 4}, nhwc), (std::vector<StridesType>{12, 1, 12, 3}));
  EXPECT_EQ(ours({2, 3, 1, 4}, nhwc), (std::vector<StridesType>{12, 1, 12, 3}));
  EXPECT_EQ(ours({2, 3, 5, 4}, nhwc), (std::vector<StridesType>{60, 1, 12, 3}));
}

TEST_F(TensorLayout, AgreesWithExecuTorchsDimOrderToStrideOnEverySmallLayout) {
  // Every rank-0..4 shape over sizes {0, 1, 2, 3}, in every dim order.
  for (size_t rank = 0; rank <= 4; ++rank) {
    size_t shapes = 1;
    for (size_t i = 0; i < rank; ++i) {
      shapes *= 4;
    }
    for (size_t code = 0; code < shapes; ++code) {
      std::vector<SizesType> sizes(rank);
      for (size_t i = 0, c = code; i < rank; ++i, c /= 4) {
        sizes[i] = static_cast<SizesType>(c % 4);
      }
      std::vector<DimOrderType> order = contiguous(rank);
      do {
        ASSERT_EQ(ours(sizes, order), executorchs(sizes, order)) << "rank " << rank << " code " << code;
      } while (std::next_permutation(order.begin(), order.end()));
    }
  }
}

// ---- rank ---------------------------------------------------------------

TEST_F(TensorLayout, RankZeroSucceedsAndWritesNothing) {
  StridesType sentinel = -7;
  const SizesType* no_sizes = nullptr;
  const DimOrderType* no_order = nullptr;
  EXPECT_EQ(dense_strides(no_sizes, no_order, 0, &sentinel), Error::Ok);
  EXPECT_EQ(sentinel, -7);
}

TEST_F(TensorLayout, RankSixteenIsTheLimitAndSeventeenIsRefused) {
  std::vector<SizesType> sizes(16, 2);
  std::vector<StridesType> strides = ours(sizes, contiguous(16));
  ASSERT_EQ(strides.size(), 16u);
  EXPECT_EQ(strides.front(), 1 << 15);
  EXPECT_EQ(strides.back(), 1);
  EXPECT_EQ(strides, executorchs(sizes, contiguous(16)));

  sizes.push_back(2);
  std::vector<DimOrderType> order = contiguous(17);
  std::vector<StridesType> out(17);
  EXPECT_EQ(dense_strides(sizes.data(), order.data(), 17, out.data()), Error::InvalidArgument);
}

// ---- dim orders that are not permutations --------------------------------

TEST_F(TensorLayout, DimOrderThatIsNotAPermutationIsRefused) {
  EXPECT_TRUE(ours({2, 3}, {0, 0}).empty());  // a dim twice
  EXPECT_TRUE(ours({2, 3}, {0, 2}).empty());  // a dim out of range
  EXPECT_TRUE(ours({2, 3}, {1, 1}).empty());  // a dim missing
  EXPECT_FALSE(ours({2, 3}, {1, 0}).empty()); // the permutation next to them
  const int64_t sizes[2] = {2, 3};
  const int64_t negative[2] = {-1, 0};
  int64_t strides[2];
  EXPECT_EQ(dense_strides(sizes, negative, 2, strides), Error::InvalidArgument);
}

TEST_F(TensorLayout, NegativeSizeIsRefused) {
  EXPECT_TRUE(ours({2, -1}, contiguous(2)).empty());
  EXPECT_FALSE(ours({2, 0}, contiguous(2)).empty());
}

// ---- overflow -----------------------------------------------------------

TEST_F(TensorLayout, StrideThatFitsInt32IsKeptAndOneThatDoesNotIsRefused) {
  // The largest stride int32 holds, then one past it.
  EXPECT_EQ(ours({2, std::numeric_limits<SizesType>::max()}, contiguous(2)),
            (std::vector<StridesType>{std::numeric_limits<StridesType>::max(), 1}));
  EXPECT_TRUE(ours({2, 65536, 32768}, contiguous(3)).empty()); // stride 2^31
  // Only strides count: the outermost dim's extent may exceed int32.
  EXPECT_EQ(ours({65536, 32768}, contiguous(2)), (std::vector<StridesType>{32768, 1}));
}

TEST_F(TensorLayout, WiderStrideTypesHoldWhatInt32CannotAndInt64OverflowIsRefused) {
  const int64_t sizes[3] = {2, 65536, 32768};
  const int64_t order[3] = {0, 1, 2};
  int64_t strides[3];
  ASSERT_EQ(dense_strides(sizes, order, 3, strides), Error::Ok);
  EXPECT_EQ(strides[0], int64_t{1} << 31);
  const int64_t huge[3] = {2, int64_t{1} << 32, int64_t{1} << 31};
  EXPECT_EQ(dense_strides(huge, order, 3, strides), Error::InvalidArgument); // stride 2^63
  // One factor of 2 less: stride 2^62.
  const int64_t fits[3] = {2, int64_t{1} << 31, int64_t{1} << 31};
  ASSERT_EQ(dense_strides(fits, order, 3, strides), Error::Ok);
  EXPECT_EQ(strides[0], int64_t{1} << 62);
}

// ---- TensorImplView -----------------------------------------------------

TEST_F(TensorLayout, ViewDefaultsToContiguousDenseStridesAndCarriesDeviceAndDynamism) {
  float data[6] = {};
  const SizesType sizes[3] = {2, 0, 3};
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.sizes = {sizes, 3};
  spec.data = data;
  spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
  spec.device_type = DeviceType::CUDA;
  spec.device_index = 1;
  ASSERT_EQ(v.reset(spec), Error::Ok);
  ASSERT_TRUE(v.ok());
  const auto& t = v.tensor();
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ((std::vector<StridesType>(t.strides().begin(), t.strides().end())), (std::vector<StridesType>{3, 3, 1}));
  EXPECT_EQ((std::vector<DimOrderType>(t.dim_order().begin(), t.dim_order().end())),
            (std::vector<DimOrderType>{0, 1, 2}));
  EXPECT_EQ(t.unsafeGetTensorImpl()->device_type(), DeviceType::CUDA);
  EXPECT_EQ(t.unsafeGetTensorImpl()->device_index(), 1);
  EXPECT_EQ(t.shape_dynamism(), TensorShapeDynamism::DYNAMIC_BOUND);
  EXPECT_EQ(t.const_data_ptr(), data);
}

TEST_F(TensorLayout, ViewRankZeroIsAScalar) {
  double x = 1.5;
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.dtype = ScalarType::Double;
  spec.data = &x;
  ASSERT_EQ(v.reset(spec), Error::Ok);
  EXPECT_EQ(v.tensor().dim(), 0);
  EXPECT_EQ(v.tensor().numel(), 1);
  EXPECT_EQ(v.tensor().nbytes(), sizeof(double));
}

TEST_F(TensorLayout, ViewResizesToCurrentSizesThroughTheSameRule) {
  uint8_t data[24] = {};
  const SizesType capacity[3] = {2, 3, 4};
  const SizesType current[3] = {2, 0, 4};
  const DimOrderType order[3] = {0, 2, 1};
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.dtype = ScalarType::Byte;
  spec.sizes = {capacity, 3};
  spec.dim_order = {order, 3};
  spec.current_sizes = {current, 3};
  spec.data = data;
  spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
  ASSERT_EQ(v.reset(spec), Error::Ok);
  std::vector<StridesType> expected(3);
  ASSERT_EQ(dense_strides(current, order, 3, expected.data()), Error::Ok);
  const auto& t = v.tensor();
  EXPECT_EQ((std::vector<SizesType>(t.sizes().begin(), t.sizes().end())), (std::vector<SizesType>{2, 0, 4}));
  EXPECT_EQ((std::vector<StridesType>(t.strides().begin(), t.strides().end())), expected);
}

TEST_F(TensorLayout, ViewRefusesCurrentSizesBeyondCapacityOrOnAStaticTensorAndIsLeftEmpty) {
  uint8_t data[6] = {};
  const SizesType capacity[2] = {2, 3};
  const SizesType bigger[2] = {2, 4};
  const SizesType smaller[2] = {1, 3};
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.dtype = ScalarType::Byte;
  spec.sizes = {capacity, 2};
  spec.data = data;
  spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
  spec.current_sizes = {bigger, 2};
  EXPECT_NE(v.reset(spec), Error::Ok);
  EXPECT_FALSE(v.ok());
  spec.current_sizes = {smaller, 2};
  EXPECT_EQ(v.reset(spec), Error::Ok);
  spec.dynamism = TensorShapeDynamism::STATIC;
  EXPECT_NE(v.reset(spec), Error::Ok);
  EXPECT_FALSE(v.ok());
  spec.current_sizes = {capacity, 2}; // the same shape is no resize
  EXPECT_EQ(v.reset(spec), Error::Ok);
}

TEST_F(TensorLayout, ViewRefusesWhatTensorImplWouldAbortOnOrMisdescribe) {
  uint8_t data[8] = {};
  const SizesType two[2] = {2, 3};
  const SizesType negative[2] = {2, -1};
  const DimOrderType repeated[2] = {0, 0};
  const DimOrderType one[1] = {0};
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.data = data;
  spec.sizes = {negative, 2};
  EXPECT_EQ(v.reset(spec), Error::InvalidArgument);
  spec.sizes = {two, 2};
  spec.dtype = static_cast<ScalarType>(127);
  EXPECT_EQ(v.reset(spec), Error::InvalidArgument);
  spec.dtype = ScalarType::Float;
  spec.dim_order = {repeated, 2};
  EXPECT_EQ(v.reset(spec), Error::InvalidArgument);
  spec.dim_order = {one, 1};
  EXPECT_EQ(v.reset(spec), Error::InvalidArgument);
  EXPECT_FALSE(v.ok());
}

TEST_F(TensorLayout, ViewRefusesADimOrderStridesOrCurrentSizesOneShorterOrLongerThanTheRankAndIsLeftEmpty) {
  // Each span, one short and one long, with the other two given at the
  // rank's length (so nothing else refuses), after a view that was made: a
  // refusal leaves the view empty. The rank's own length is accepted.
  uint8_t data[24] = {};
  const SizesType sizes[3] = {2, 3, 4};
  const SizesType current[4] = {2, 3, 1, 1};
  const DimOrderType order[4] = {0, 1, 2, 3};
  const StridesType strides[4] = {12, 4, 1, 1};
  enum Field { kDimOrder, kStrides, kCurrentSizes };
  for (const Field field : {kDimOrder, kStrides, kCurrentSizes}) {
    for (const size_t length : {size_t{2}, size_t{3}, size_t{4}}) {
      TensorImplView v;
      TensorImplView::Spec spec;
      spec.dtype = ScalarType::Byte;
      spec.sizes = {sizes, 3};
      spec.data = data;
      spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
      ASSERT_EQ(v.reset(spec), Error::Ok);
      spec.dim_order = {order, field == kDimOrder ? length : 3};
      spec.strides = {strides, field == kStrides ? length : 3};
      spec.current_sizes = {current, field == kCurrentSizes ? length : 3};
      const Error err = v.reset(spec);
      if (length == 3) {
        ASSERT_EQ(err, Error::Ok) << "field " << field;
        EXPECT_EQ(v.tensor().dim(), 3);
        EXPECT_EQ(v.tensor().size(2), 1); // current_sizes {2, 3, 1}
      } else {
        EXPECT_EQ(err, Error::InvalidArgument) << "field " << field << " of length " << length;
        EXPECT_FALSE(v.ok()) << "field " << field << " of length " << length;
      }
    }
  }
}

TEST_F(TensorLayout, ViewRefusesANegativeSizeAtTheFirstOrLastDimEvenWithStridesGiven) {
  // With strides given no dense rule looks at the sizes: the view's own check must.
  uint8_t data[6] = {};
  const StridesType strides[3] = {3, 1, 1};
  for (const std::vector<SizesType>& sizes :
       {std::vector<SizesType>{-1, 3, 1}, std::vector<SizesType>{2, 3, -1}, std::vector<SizesType>{2, 3, 1}}) {
    TensorImplView v;
    TensorImplView::Spec spec;
    spec.dtype = ScalarType::Byte;
    spec.sizes = {sizes.data(), 3};
    spec.strides = {strides, 3};
    spec.data = data;
    const bool negative = sizes.front() < 0 || sizes.back() < 0;
    EXPECT_EQ(v.reset(spec), negative ? Error::InvalidArgument : Error::Ok) << sizes.front() << " " << sizes.back();
    EXPECT_EQ(v.ok(), !negative);
  }
}

TEST_F(TensorLayout, ViewResizesWhenCurrentSizesDifferAtTheFirstDimTheLastOrEvery) {
  // Every dim is compared, from the first to the last: a difference in any
  // one of them is a resize, and the tensor holds the current sizes.
  uint8_t data[24] = {};
  const SizesType capacity[3] = {2, 3, 4};
  for (const std::vector<SizesType>& current : {std::vector<SizesType>{1, 3, 4}, std::vector<SizesType>{2, 3, 2},
                                                std::vector<SizesType>{1, 2, 3}, std::vector<SizesType>{2, 3, 4}}) {
    TensorImplView v;
    TensorImplView::Spec spec;
    spec.dtype = ScalarType::Byte;
    spec.sizes = {capacity, 3};
    spec.current_sizes = {current.data(), 3};
    spec.data = data;
    spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
    ASSERT_EQ(v.reset(spec), Error::Ok);
    EXPECT_EQ((std::vector<SizesType>(v.tensor().sizes().begin(), v.tensor().sizes().end())), current);
    std::vector<StridesType> dense(3);
    ASSERT_EQ(dense_strides(current.data(), contiguous(3).data(), 3, dense.data()), Error::Ok);
    EXPECT_EQ((std::vector<StridesType>(v.tensor().strides().begin(), v.tensor().strides().end())), dense);
    // A static tensor cannot be resized, so only the same shape passes.
    spec.dynamism = TensorShapeDynamism::STATIC;
    const bool same = current == std::vector<SizesType>(capacity, capacity + 3);
    EXPECT_EQ(v.reset(spec), same ? Error::Ok : Error::NotSupported) << current[0] << current[1] << current[2];
  }
}

// `n` items of T ending exactly where a page that cannot be read begins, so
// a read of one item past them faults instead of passing unnoticed.
template <typename T>
class BeforeAGuardPage {
 public:
  explicit BeforeAGuardPage(const std::vector<T>& items) : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    void* m = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    base_ = static_cast<uint8_t*>(m);
    EXPECT_EQ(mprotect(base_ + page_, page_, PROT_NONE), 0);
    items_ = reinterpret_cast<T*>(base_ + page_) - items.size();
    std::copy(items.begin(), items.end(), items_);
  }
  ~BeforeAGuardPage() {
    munmap(base_, 2 * page_);
  }
  BeforeAGuardPage(const BeforeAGuardPage&) = delete;
  BeforeAGuardPage& operator=(const BeforeAGuardPage&) = delete;
  executorch::runtime::Span<const T> span() const {
    return {items_, static_cast<size_t>(reinterpret_cast<const T*>(base_ + page_) - items_)};
  }

 private:
  size_t page_;
  uint8_t* base_ = nullptr;
  T* items_ = nullptr;
};

TEST_F(TensorLayout, ViewReadsEachSpanFromItsFirstItemToTheRanksLastAndNoFurther) {
  // Every span ends where readable memory ends: reading one item past the
  // rank would fault. Each loop over the dims runs from 0 to rank - 1.
  uint8_t data[24] = {};
  const BeforeAGuardPage<SizesType> sizes({2, 3, 4});
  const BeforeAGuardPage<DimOrderType> order({0, 2, 1});
  const BeforeAGuardPage<SizesType> current({1, 3, 2});
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.dtype = ScalarType::Byte;
  spec.sizes = sizes.span();
  spec.dim_order = order.span();
  spec.current_sizes = current.span();
  spec.data = data;
  spec.dynamism = TensorShapeDynamism::DYNAMIC_BOUND;
  ASSERT_EQ(v.reset(spec), Error::Ok);
  EXPECT_EQ((std::vector<SizesType>(v.tensor().sizes().begin(), v.tensor().sizes().end())),
            (std::vector<SizesType>{1, 3, 2}));
  EXPECT_EQ((std::vector<DimOrderType>(v.tensor().dim_order().begin(), v.tensor().dim_order().end())),
            (std::vector<DimOrderType>{0, 2, 1}));
  // The same shape as the capacity, on a static tensor: no resize, every dim compared.
  const BeforeAGuardPage<SizesType> same({2, 3, 4});
  const BeforeAGuardPage<StridesType> strides({12, 1, 3});
  spec.current_sizes = same.span();
  spec.strides = strides.span();
  spec.dynamism = TensorShapeDynamism::STATIC;
  ASSERT_EQ(v.reset(spec), Error::Ok);
  EXPECT_EQ((std::vector<StridesType>(v.tensor().strides().begin(), v.tensor().strides().end())),
            (std::vector<StridesType>{12, 1, 3}));
}

TEST_F(TensorLayout, ViewTakesUpToSixteenDimsAndTheTestsViewSeventeenWithGivenStrides) {
  // TensorImpl holds 17 dims and the kernels must refuse them, so their
  // tests build one, through the test-only AnyRankTensorView: the installed
  // view holds what ExecuTorch's runtime makes, with no heap path.
  uint8_t data[1] = {};
  const std::vector<SizesType> sixteen(16, 1), seventeen(17, 1);
  const std::vector<StridesType> ones(17, 1);
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.dtype = ScalarType::Byte;
  spec.data = data;
  spec.sizes = {sixteen.data(), 16};
  EXPECT_EQ(v.reset(spec), Error::Ok);
  EXPECT_EQ(v.tensor().dim(), 16);
  spec.sizes = {seventeen.data(), 17};
  EXPECT_EQ(v.reset(spec), Error::InvalidArgument);
  EXPECT_FALSE(v.ok());
  spec.strides = {ones.data(), 17};
  EXPECT_EQ(v.reset(spec), Error::InvalidArgument);
  EXPECT_FALSE(v.ok());

  et_copy_test::AnyRankTensorView any;
  spec.strides = {};
  EXPECT_EQ(any.reset(spec), Error::InvalidArgument); // no dense rule beyond 16
  EXPECT_FALSE(any.ok());
  spec.strides = {ones.data(), 17};
  ASSERT_EQ(any.reset(spec), Error::Ok);
  EXPECT_EQ(any.tensor().dim(), 17);
  EXPECT_EQ(any.tensor().dim_order()[16], 16);
  spec.sizes = {sixteen.data(), 16}; // up to 16 dims it is the installed view
  spec.strides = {};
  ASSERT_EQ(any.reset(spec), Error::Ok);
  EXPECT_EQ(any.tensor().dim(), 16);
}

TEST_F(TensorLayout, ViewTakesGivenStridesAsTheyAreEvenForAMalformedDimOrder) {
  // Tests and the fuzz target hand kernels layouts they must reject.
  uint8_t data[6] = {};
  const SizesType sizes[2] = {2, 3};
  const DimOrderType repeated[2] = {1, 1};
  const StridesType gaps[2] = {4, 1};
  TensorImplView v;
  TensorImplView::Spec spec;
  spec.dtype = ScalarType::Byte;
  spec.sizes = {sizes, 2};
  spec.dim_order = {repeated, 2};
  spec.strides = {gaps, 2};
  spec.data = data;
  ASSERT_EQ(v.reset(spec), Error::Ok);
  EXPECT_EQ(v.tensor().strides()[0], 4);
  EXPECT_EQ(v.tensor().dim_order()[0], 1);
}

} // namespace
