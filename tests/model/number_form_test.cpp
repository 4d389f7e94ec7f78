#include "joulepipe/model/number_form.hpp"

#include <string>

#include <gtest/gtest.h>

namespace joulepipe::model {
namespace {

// Issue 41, item 2: one number form. Before, `joulepipe profile --tp 0x2`
// ran with 2 GPUs and `plan --microbatches 010` planned 8 microbatches.
TEST(NonDecimalProblemTest, OtherBasesAndLeadingZerosAreNamedWithTheDecimal) {
  EXPECT_EQ(NonDecimalProblem("0x10"),
            "'0x10' is hexadecimal; joulepipe reads numbers in decimal only: write 16");
  EXPECT_EQ(NonDecimalProblem("-0X1f"),
            "'-0X1f' is hexadecimal; joulepipe reads numbers in decimal only: write -31");
  EXPECT_EQ(NonDecimalProblem("0b101"),
            "'0b101' is binary; joulepipe reads numbers in decimal only: write 5");
  EXPECT_EQ(NonDecimalProblem("0o17"),
            "'0o17' is octal; joulepipe reads numbers in decimal only: write 15");
  // A hexadecimal float has no whole decimal to offer.
  EXPECT_EQ(NonDecimalProblem("0x1p-4"),
            "'0x1p-4' is hexadecimal; joulepipe reads numbers in "
            "decimal only");
  EXPECT_NE(NonDecimalProblem("010").find("'010' has a leading zero"), std::string::npos);
  EXPECT_NE(NonDecimalProblem("+007.5").find("leading zero"), std::string::npos);
}

TEST(NonDecimalProblemTest, DecimalFormsAndWordsPass) {
  for (const char* ok :
       {"0", "-0", "0.5", "-0.25", "10", "1e3", "0e0", "1410", ".5", "even", "", "-", "0.", "x"}) {
    EXPECT_EQ(NonDecimalProblem(ok), "") << ok;
  }
}

TEST(NonDecimalProblemTest, ControlBytesInTheValueAreShownEscaped) {
  const std::string problem = NonDecimalProblem(std::string("0x1\x1b[2J\n", 9));
  EXPECT_EQ(problem.find('\x1b'), std::string::npos) << problem;
  EXPECT_EQ(problem.find('\n'), std::string::npos) << problem;
  EXPECT_NE(problem.find("\\u001b[2J\\n"), std::string::npos) << problem;
}

}  // namespace
}  // namespace joulepipe::model
