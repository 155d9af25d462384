// Constant folding of arithmetic: elementwise binary and unary ops with
// numpy broadcasting, comparisons and logic, Where, ReduceProd - what
// exporters compute sizes with (seq_len // heads, dims * 2, ...).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "graph/folding_kernels.h"

namespace placer::folding {
namespace {

enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kPow,
  kMin,
  kMax,
  kEqual,
  kLess,
  kGreater,
  kAnd,
  kOr
};

template <BinaryOp kOp>
Result FoldBinary(const Op& op, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 2)) return std::nullopt;
  const FoldedValue& a = *in[0].value;
  const FoldedValue& b = *in[1].value;
  auto dims = BroadcastShape({&a, &b});
  if (!dims || Product(*dims) > kMaxFoldedElements) return std::nullopt;
  constexpr bool kLogical = kOp == BinaryOp::kEqual || kOp == BinaryOp::kLess ||
                            kOp == BinaryOp::kGreater ||
                            kOp == BinaryOp::kAnd || kOp == BinaryOp::kOr;
  FoldedValue v = MakeLike(kLogical ? DataType::kBool : a.dtype, *dims);
  std::vector<int64_t> index;
  for (int64_t o = 0; o < v.size(); ++o) {
    Unravel(o, *dims, &index);
    int64_t i = BroadcastIndex(a, index), j = BroadcastIndex(b, index);
    if (a.is_integral() && !kLogical) {
      int64_t x = IntAt(a, i), y = IntAt(b, j), r = 0;
      // A result that int64 cannot hold is not folded (never guessed):
      // found by fuzzing (128 * 288230376151711743 in a Mul).
      switch (kOp) {
        case BinaryOp::kAdd:
          if (__builtin_add_overflow(x, y, &r)) return std::nullopt;
          break;
        case BinaryOp::kSub:
          if (__builtin_sub_overflow(x, y, &r)) return std::nullopt;
          break;
        case BinaryOp::kMul:
          if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
          break;
        case BinaryOp::kDiv:
          if (y == 0 || (y == -1 && x == INT64_MIN)) return std::nullopt;
          r = x / y;
          break;
        case BinaryOp::kMod: {
          if (y == 0 || (y == -1 && x == INT64_MIN)) return std::nullopt;
          if (op.IntAttribute("fmod", 0)) {
            r = x % y;
          } else if (__builtin_add_overflow(x % y, y, &r)) {
            return std::nullopt;
          } else {
            r %= y;
          }
          break;
        }
        case BinaryOp::kPow: {
          std::optional<int64_t> p =
              ToInt64(std::pow(static_cast<double>(x), static_cast<double>(y)));
          if (!p) return std::nullopt;
          r = *p;
          break;
        }
        case BinaryOp::kMin:
          r = std::min(x, y);
          break;
        case BinaryOp::kMax:
          r = std::max(x, y);
          break;
        default:
          break;
      }
      v.ints[o] = r;
      continue;
    }
    double x = RealAt(a, i), y = RealAt(b, j), r = 0;
    switch (kOp) {
      case BinaryOp::kAdd:
        r = x + y;
        break;
      case BinaryOp::kSub:
        r = x - y;
        break;
      case BinaryOp::kMul:
        r = x * y;
        break;
      case BinaryOp::kDiv:
        r = x / y;
        break;
      case BinaryOp::kMod:
        r = std::fmod(x, y);
        break;
      case BinaryOp::kPow:
        r = std::pow(x, y);
        break;
      case BinaryOp::kMin:
        r = std::min(x, y);
        break;
      case BinaryOp::kMax:
        r = std::max(x, y);
        break;
      case BinaryOp::kEqual:
        r = x == y;
        break;
      case BinaryOp::kLess:
        r = x < y;
        break;
      case BinaryOp::kGreater:
        r = x > y;
        break;
      case BinaryOp::kAnd:
        r = (x != 0) && (y != 0);
        break;
      case BinaryOp::kOr:
        r = (x != 0) || (y != 0);
        break;
    }
    if (v.is_integral()) {
      v.ints[o] = static_cast<int64_t>(r);
    } else {
      v.reals[o] = r;
    }
  }
  return One(std::move(v));
}

enum class UnaryOp { kNeg, kAbs, kSqrt, kFloor, kCeil, kNot, kReciprocal };

template <UnaryOp kOp>
Result FoldUnary(const Op&, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 1)) return std::nullopt;
  FoldedValue v = *in[0].value;
  for (int64_t i = 0; i < v.size(); ++i) {
    double x = RealAt(v, i), r = 0;
    switch (kOp) {
      case UnaryOp::kNeg:
        r = -x;
        break;
      case UnaryOp::kAbs:
        r = std::fabs(x);
        break;
      case UnaryOp::kSqrt:
        r = std::sqrt(x);
        break;
      case UnaryOp::kFloor:
        r = std::floor(x);
        break;
      case UnaryOp::kCeil:
        r = std::ceil(x);
        break;
      case UnaryOp::kNot:
        r = x == 0;
        break;
      case UnaryOp::kReciprocal:
        r = 1 / x;
        break;
    }
    if (v.is_integral()) {
      if ((kOp == UnaryOp::kNeg || kOp == UnaryOp::kAbs) &&
          v.ints[i] == INT64_MIN) {
        return std::nullopt;  // -INT64_MIN does not exist
      }
      if (kOp == UnaryOp::kNeg) {
        v.ints[i] = -v.ints[i];
      } else if (kOp == UnaryOp::kAbs) {
        v.ints[i] = v.ints[i] < 0 ? -v.ints[i] : v.ints[i];
      } else {
        std::optional<int64_t> as_int = ToInt64(r);
        if (!as_int) return std::nullopt;
        v.ints[i] = *as_int;
      }
    } else {
      v.reals[i] = r;
    }
  }
  return One(std::move(v));
}

Result FoldWhere(const Op&, const std::vector<FoldInput>& in) {
  if (!AllConstant(in, 3)) return std::nullopt;
  const FoldedValue &c = *in[0].value, &x = *in[1].value, &y = *in[2].value;
  auto dims = BroadcastShape({&c, &x, &y});
  if (!dims || Product(*dims) > kMaxFoldedElements) return std::nullopt;
  FoldedValue v = MakeLike(x.dtype, *dims);
  std::vector<int64_t> index;
  for (int64_t o = 0; o < v.size(); ++o) {
    Unravel(o, *dims, &index);
    bool pick_x = IntAt(c, BroadcastIndex(c, index)) != 0;
    const FoldedValue& src = pick_x ? x : y;
    SetFrom(v, o, src, BroadcastIndex(src, index));
  }
  return One(std::move(v));
}

Result FoldReduceProd(const Op& op, const std::vector<FoldInput>& in) {
  // Only the full reduction that shape code uses (no axes).
  if (!AllConstant(in, 1) || !op.IntsAttribute("axes").empty() ||
      in.size() > 1) {
    return std::nullopt;
  }
  FoldedValue v = MakeLike(in[0].value->dtype, {});
  if (op.IntAttribute("keepdims", 1)) {
    v.dims.assign(in[0].value->dims.size(), 1);
  }
  double p = 1;
  for (int64_t i = 0; i < in[0].value->size(); ++i)
    p *= RealAt(*in[0].value, i);
  if (v.is_integral()) {
    std::optional<int64_t> as_int = ToInt64(p);
    if (!as_int) return std::nullopt;
    v.ints = {*as_int};
  } else {
    v.reals = {p};
  }
  return One(std::move(v));
}

}  // namespace

void AddArithmeticFolds(FoldTable& table) {
  table["Where"] = FoldWhere;
  table["ReduceProd"] = FoldReduceProd;
  table["Add"] = FoldBinary<BinaryOp::kAdd>;
  table["Sub"] = FoldBinary<BinaryOp::kSub>;
  table["Mul"] = FoldBinary<BinaryOp::kMul>;
  table["Div"] = FoldBinary<BinaryOp::kDiv>;
  table["Mod"] = FoldBinary<BinaryOp::kMod>;
  table["Pow"] = FoldBinary<BinaryOp::kPow>;
  table["Min"] = FoldBinary<BinaryOp::kMin>;
  table["Max"] = FoldBinary<BinaryOp::kMax>;
  table["Equal"] = FoldBinary<BinaryOp::kEqual>;
  table["Less"] = FoldBinary<BinaryOp::kLess>;
  table["Greater"] = FoldBinary<BinaryOp::kGreater>;
  table["And"] = FoldBinary<BinaryOp::kAnd>;
  table["Or"] = FoldBinary<BinaryOp::kOr>;
  table["Neg"] = FoldUnary<UnaryOp::kNeg>;
  table["Abs"] = FoldUnary<UnaryOp::kAbs>;
  table["Sqrt"] = FoldUnary<UnaryOp::kSqrt>;
  table["Floor"] = FoldUnary<UnaryOp::kFloor>;
  table["Ceil"] = FoldUnary<UnaryOp::kCeil>;
  table["Not"] = FoldUnary<UnaryOp::kNot>;
  table["Reciprocal"] = FoldUnary<UnaryOp::kReciprocal>;
}

}  // namespace placer::folding
