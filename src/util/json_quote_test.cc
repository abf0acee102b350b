#include "src/util/json_quote.h"

#include <gtest/gtest.h>

#include <string>

namespace logfs::util {
namespace {

TEST(JsonQuoteTest, PlainTextIsQuotedAsItIs) {
  EXPECT_EQ("\"\"", JsonQuote(""));
  EXPECT_EQ("\"127.0.0.1:7001\"", JsonQuote("127.0.0.1:7001"));
  EXPECT_EQ("\"rack1/host7 ~\"", JsonQuote("rack1/host7 ~"));
}

TEST(JsonQuoteTest, QuotesBackslashesAndControlCharactersAreEscaped) {
  EXPECT_EQ(R"("say \"hi\" C:\\dir")", JsonQuote(R"(say "hi" C:\dir)"));
  EXPECT_EQ(R"("a\nb\tc\rd\be\ff")", JsonQuote("a\nb\tc\rd\be\ff"));
  EXPECT_EQ(R"("\u0000\u0001\u001f")", JsonQuote(std::string("\x00\x01\x1f", 3)));
  EXPECT_EQ("\"\x7f\"", JsonQuote("\x7f"));  // DEL needs no escape
}

TEST(JsonQuoteTest, ValidUtf8IsKeptAndInvalidBytesBecomeReplacementCharacters) {
  // Goal: the output is valid JSON (valid UTF-8) whatever the input bytes.
  // (a) Two-, three- and four-byte sequences pass through.
  EXPECT_EQ("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe\"",
            JsonQuote("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe"));
  // (b) A stray continuation byte, a lead byte cut short, an overlong form,
  // a surrogate and a byte never valid in UTF-8: each bad byte is replaced
  // and what follows it is read again.
  EXPECT_EQ(R"("a\ufffdb")", JsonQuote("a\x80"
                                       "b"));
  EXPECT_EQ(R"("x\ufffd\ufffd")", JsonQuote("x\xe2\x82"));
  EXPECT_EQ(R"("\ufffd\ufffd")", JsonQuote("\xc0\xaf"));
  EXPECT_EQ(R"("\ufffd\ufffd\ufffd")", JsonQuote("\xed\xa0\x80"));
  EXPECT_EQ(R"("\ufffd")", JsonQuote("\xff"));
  EXPECT_EQ(R"("\ufffd\ufffd\ufffd\ufffd")", JsonQuote("\xf4\x90\x80\x80"));
}

}  // namespace
}  // namespace logfs::util
