// The grid / when expressions of CUDA launches: what parses, what each
// evaluates to, and the errors for what does not parse.
#include "llmc/core/artifact/cuda_launch_expr.h"

#include <gtest/gtest.h>

#include <string>

namespace llmc {
namespace {

int64_t Grid(const std::string& text, LaunchVars v) {
  auto e = ParseGridExpr(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  return e.ok() ? e->Evaluate(v) : -1;
}

bool When(const std::string& text, LaunchVars v) {
  auto e = ParseWhenExpr(text);
  EXPECT_TRUE(e.ok()) << text << ": " << e.status();
  return e.ok() && e->Holds(v);
}

std::string GridError(const std::string& text) {
  auto e = ParseGridExpr(text);
  EXPECT_FALSE(e.ok()) << text << " parsed as " << e->ToString();
  return e.ok() ? "" : std::string(e.status().message());
}

std::string WhenError(const std::string& text) {
  auto e = ParseWhenExpr(text);
  EXPECT_FALSE(e.ok()) << text << " parsed as " << e->ToString();
  return e.ok() ? "" : std::string(e.status().message());
}

TEST(CudaLaunchExpr, GridEvaluates) {
  LaunchVars v{.tokens = 37, .logits = 5, .splits = 9};
  EXPECT_EQ(Grid("1", v), 1);
  EXPECT_EQ(Grid("65535", v), 65535);
  EXPECT_EQ(Grid("T", v), 37);
  EXPECT_EQ(Grid("L", v), 5);
  EXPECT_EQ(Grid("splits", v), 9);
  EXPECT_EQ(Grid("cdiv(T,16)", v), 3);
  EXPECT_EQ(Grid("cdiv(T,37)", v), 1);
  EXPECT_EQ(Grid("cdiv(T,36)", v), 2);
  EXPECT_EQ(Grid("cdiv(L,1)", v), 5);
  EXPECT_EQ(Grid(" cdiv ( L , 4 ) ", v), 2);
  EXPECT_EQ(Grid("cdiv(T,64)", {.tokens = 1}), 1);
  EXPECT_EQ(Grid("cdiv(T,64)", {.tokens = 128}), 2);
  EXPECT_EQ(Grid("2147483647", v), 2147483647);
  LaunchVars prefill{.tokens = 300, .logits = 3, .splits = 2, .queries = 129, .seqs = 3};
  EXPECT_EQ(Grid("Q", prefill), 129);
  EXPECT_EQ(Grid("S", prefill), 3);
  EXPECT_EQ(Grid("cdiv(Q,64)", prefill), 3);
  EXPECT_EQ(Grid("cdiv(S,2)", prefill), 2);
  // min: the split attention's cap (v has 9 splits).
  EXPECT_EQ(Grid("min(splits,32)", v), 9);
  EXPECT_EQ(Grid("min(splits,4)", v), 4);
  EXPECT_EQ(Grid("min(splits,9)", v), 9);
  EXPECT_EQ(Grid(" min ( T , 16 ) ", v), 16);
  EXPECT_EQ(Grid("min(splits,32)", {.splits = 1}), 1);
}

TEST(CudaLaunchExpr, GridToStringIsCanonical) {
  EXPECT_EQ(ParseGridExpr(" cdiv( T ,8)")->ToString(), "cdiv(T,8)");
  EXPECT_EQ(ParseGridExpr("cdiv(L,1)")->ToString(), "L");
  EXPECT_EQ(ParseGridExpr(" splits ")->ToString(), "splits");
  EXPECT_EQ(ParseGridExpr("007")->ToString(), "7");
  EXPECT_EQ(ParseGridExpr(" min( splits ,032)")->ToString(), "min(splits,32)");
}

TEST(CudaLaunchExpr, GridErrors) {
  EXPECT_EQ(GridError(""), "'' is not a grid expression (a positive integer, T, L, Q, S, splits, "
                           "cdiv(T|L|Q|S,<positive integer>) or min(T|L|Q|S|splits,<positive "
                           "integer>))");
  EXPECT_EQ(GridError("min(splits,0)"), "'min(splits,0)' caps at 0");
  EXPECT_EQ(GridError("0"), "'0' is 0");
  EXPECT_EQ(GridError("cdiv(T,0)"), "'cdiv(T,0)' divides by 0");
  for (const char* bad : {"s", "t", "T+1", "-1", "2147483648", "cdiv(splits,2)", "cdiv(T)",
                          "cdiv(T,)", "cdiv(T,2", "cdiv(T,2))", "cdiv(4,T)", "T T", "Tokens",
                          "splits2", "1.5", "cdiv(T,-2)", "min(splits)", "min(splits,)",
                          "min(4,splits)", "min(splits,2", "min(splits,-1)", "min(T,2))"})
    EXPECT_NE(GridError(bad).find("is not a grid expression"), std::string::npos) << bad;
}

TEST(CudaLaunchExpr, WhenHolds) {
  LaunchVars v{.tokens = 8, .logits = 1, .splits = 1};
  EXPECT_TRUE(When("", v));
  EXPECT_TRUE(When("   ", v));
  EXPECT_TRUE(When("T<=8", v));
  EXPECT_FALSE(When("T>8", v));
  EXPECT_FALSE(When("T<=7", v));
  EXPECT_TRUE(When("T>7", v));
  EXPECT_FALSE(When("splits>1", v));
  EXPECT_TRUE(When("splits>1", {.tokens = 1, .logits = 1, .splits = 2}));
  EXPECT_TRUE(When(" L <= 0 ", {.tokens = 1, .logits = 0, .splits = 1}));
  EXPECT_TRUE(When("L>0", v));
  // Conjunctions: the split-attention reduction runs for decode steps only.
  LaunchVars decode{.tokens = 4, .logits = 4, .splits = 3, .queries = 1, .seqs = 4};
  LaunchVars prefill{.tokens = 40, .logits = 1, .splits = 3, .queries = 40, .seqs = 1};
  EXPECT_TRUE(When("Q<=16&&splits>1", decode));
  EXPECT_FALSE(When("Q<=16&&splits>1", prefill));
  EXPECT_FALSE(When("Q <= 16 && splits > 1", {.tokens = 4, .splits = 1, .queries = 1}));
  EXPECT_TRUE(When("Q>16 && S<=1 && T>39", prefill));
  EXPECT_FALSE(When("Q>16 && S<=1 && T>40", prefill));
}

TEST(CudaLaunchExpr, WhenToString) {
  EXPECT_EQ(ParseWhenExpr("")->ToString(), "");
  EXPECT_EQ(ParseWhenExpr(" T <= 16")->ToString(), "T<=16");
  EXPECT_EQ(ParseWhenExpr("splits>1")->ToString(), "splits>1");
  EXPECT_EQ(ParseWhenExpr(" Q <= 16 &&splits>1 ")->ToString(), "Q<=16&&splits>1");
}

TEST(CudaLaunchExpr, WhenErrors) {
  EXPECT_EQ(WhenError("T<8"), "'T<8' is not a condition: the operator must be <= or >");
  EXPECT_EQ(WhenError("T>=8"),
            "'T>=8' is not a condition: <= or > must be followed by a non-negative integer");
  EXPECT_EQ(WhenError("s>1"), "'s>1' is not a condition (T, L, Q, S or splits, then <= or >, "
                              "then an integer)");
  EXPECT_EQ(WhenError("T<=8 & L>1"), "'T<=8 & L>1' is not a condition: conditions are joined by &&");
  for (const char* bad : {"T", "T<=", "T<=-1", "T<=x", "T<=8 &&", "&& T<=8", "T<=8 || L>1",
                          "8>=T", "T==8", "T>8>9"})
    EXPECT_NE(WhenError(bad).find("is not a condition"), std::string::npos) << bad;
}

}  // namespace
}  // namespace llmc
