#include "tensorwire/core/yaml_doc.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../support/yaml_compare.hpp"

namespace tw {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The fast path must accept `text` and build exactly what yaml-cpp builds.
void expect_fast_matches_reference(const std::string& text) {
  const auto fast = YamlDoc::parse_fast(text, "t.yaml");
  ASSERT_TRUE(fast.has_value()) << "fast path gave up on:\n" << text;
  Diagnostic err;
  const auto ref = YamlDoc::parse_reference(text, "t.yaml", &err);
  ASSERT_TRUE(ref.has_value()) << err.str();
  std::string why;
  EXPECT_TRUE(test::same_tree(*fast, *ref, &why)) << why << "\n" << text;
}

TEST(YamlDoc, FastPathMatchesReferenceOnTheSubset) {
  expect_fast_matches_reference("a: 1\nb: two words\nc: \"quoted: yes\"\nd: 'it''s'\n");
  expect_fast_matches_reference("a:\n  - x\n  - {id: y, after: [recv:z, q@-1, \"s\"]}\n  - k: v\n    j: [a:b, c]\n  -\nb: ~\n");
  expect_fast_matches_reference("list:\n- 1\n- 2\nnext: {}\nempty: []\n");
  expect_fast_matches_reference("# comment\n\nk: v   # trailing comment\nn: null\nm: -1ms\n");
  expect_fast_matches_reference("- a\n- x: 1\n  y:\n    z: [1, [2, {w: 3}]]\n- [b, c]\n");
  expect_fast_matches_reference("a: 1\r\nb: 2\r\n");
}

// Read from a stream: a file at its size, a stream that cannot seek in pieces,
// and from where the stream stands; every way gives the same tree.
TEST(YamlDoc, ReadsStreamsWhetherOrNotTheySeek) {
  std::string text = "a: 1\nops:\n";
  for (int i = 0; i < 5000; ++i) text += "  - {id: op" + std::to_string(i) + ", after: [x, y]}\n";
  const auto want = YamlDoc::parse_fast(text, "t.yaml");
  ASSERT_TRUE(want.has_value());
  std::string why;

  std::istringstream seekable(text);
  Diagnostic err;
  const auto a = YamlDoc::parse(seekable, "t.yaml", &err);
  ASSERT_TRUE(a.has_value()) << err.str();
  EXPECT_TRUE(test::same_tree(*a, *want, &why)) << why;

  // A stream buffer that refuses to seek, as a pipe does.
  struct NoSeek : std::stringbuf {
    using std::stringbuf::stringbuf;
    pos_type seekoff(off_type, std::ios::seekdir, std::ios::openmode) override { return pos_type(off_type(-1)); }
    pos_type seekpos(pos_type, std::ios::openmode) override { return pos_type(off_type(-1)); }
  } buf(text);
  std::istream pipe(&buf);
  const auto b = YamlDoc::parse(pipe, "t.yaml", &err);
  ASSERT_TRUE(b.has_value()) << err.str();
  EXPECT_TRUE(test::same_tree(*b, *want, &why)) << why;

  std::istringstream after_header("# header line\n" + text);
  std::string header;
  std::getline(after_header, header);
  const auto c = YamlDoc::parse(after_header, "t.yaml", &err);
  ASSERT_TRUE(c.has_value()) << err.str();
  EXPECT_TRUE(test::same_tree(*c, *want, &why)) << why;

  std::istringstream empty("");
  const auto d = YamlDoc::parse(empty, "t.yaml", &err);
  ASSERT_TRUE(d.has_value()) << err.str();
  EXPECT_EQ(d->root().kind, YamlDoc::Kind::null);
}

TEST(YamlDoc, FastPathReadsTheBundledFiles) {
  for (const char* f : {"/docs/sample-profile.yaml", "/traffic_profiles/models/resnet50.yaml",
                        "/traffic_profiles/resnet50-ring-4.yaml", "/traffic_profiles/resnet50-ps-4w2s.yaml"}) {
    SCOPED_TRACE(f);
    expect_fast_matches_reference(read(std::string(TW_SOURCE_DIR) + f));
  }
}

TEST(YamlDoc, FastPathGivesUpOutsideTheSubset) {
  for (const char* text : {"a: &x 1\nb: *x\n", "a: |\n  text\n", "a: !tag 1\n", "---\na: 1\n", "a: \"esc\\n\"\n",
                           "a: [1,\n  2]\n", "a:\tb\n", "a: caf\xc3\xa9\n", "? a\n: b\n", "a: b: c\n", "\"k\": 1\n",
                           "a: [x, ]\n", "plain\n", "- - b\n", "a: {flo?: b}\n", " -\r", "", "a: b\n c\n"}) {
    EXPECT_FALSE(YamlDoc::parse_fast(text, "t.yaml").has_value()) << text;
  }
}

TEST(YamlDoc, ReportsSyntaxErrorsWithPosition) {
  Diagnostic err;
  EXPECT_FALSE(YamlDoc::parse(std::string("a: [1, 2\nb: 3\n"), "bad.yaml", &err).has_value());
  EXPECT_EQ(err.file, "bad.yaml");
  EXPECT_GT(err.line, 0);
  EXPECT_NE(err.message.find("YAML syntax"), std::string::npos) << err.str();
}

// yaml-cpp takes a quoted string that is never closed to the end of the file
// without a word (the rest of a profile vanished into its description, and its
// fields were reported missing); it is refused where the string starts.
TEST(YamlDoc, RefusesAQuotedStringThatIsNeverClosed) {
  Diagnostic err;
  EXPECT_FALSE(YamlDoc::parse(std::string("version: 1\nmeta:\n  note: \"open\n  rest: 2\n"), "q.yaml", &err).has_value());
  EXPECT_EQ(err.str(), "q.yaml:3:9: a quoted string that is never closed: it runs to the end of the file");
  EXPECT_FALSE(YamlDoc::parse(std::string("a: 'it''s\nb: 1\n"), "q.yaml", &err).has_value());
  EXPECT_EQ(err.str(), "q.yaml:1:4: a quoted string that is never closed: it runs to the end of the file");
  EXPECT_FALSE(YamlDoc::parse(std::string("a: \"x \\\" y\n"), "q.yaml", &err).has_value()) << "an escaped quote closes nothing";
  // Closed ones, escapes and '' included, and block scalars at the end, are read.
  for (const char* ok : {"a: \"x \\\" y\"\n", "a: 'it''s'\n", "a: \"multi\n  line\"\n", "a: |\n  text \"\n"}) {
    EXPECT_TRUE(YamlDoc::parse(std::string(ok), "q.yaml", &err).has_value()) << ok << err.str();
  }
}

TEST(YamlDoc, RefusesTextThatIsNotPrintableUtf8) {
  Diagnostic err;
  // Where: line and column (in characters) of the first bad byte.
  EXPECT_FALSE(YamlDoc::parse(std::string("a: 1\nhost: \"h\xff\"\n"), "p.yaml", &err).has_value());
  EXPECT_EQ(err.str(), "p.yaml:2:9: byte 0xff is not UTF-8 (YAML files are UTF-8 text)");
  EXPECT_FALSE(YamlDoc::parse(std::string("version: 1\niterations: 3\0\n", 26), "p.yaml", &err).has_value());
  EXPECT_EQ(err.str(), "p.yaml:2:14: control character 0x00 (a YAML file holds printable text)");
  EXPECT_FALSE(YamlDoc::parse(std::string("a: \xc0\xaf\n"), "p.yaml", &err).has_value());  // overlong '/'
  EXPECT_NE(err.message.find("not UTF-8"), std::string::npos) << err.str();
  EXPECT_FALSE(YamlDoc::parse(std::string("a: \xed\xa0\x80\n"), "p.yaml", &err).has_value());  // a surrogate
  EXPECT_NE(err.message.find("not UTF-8"), std::string::npos) << err.str();
  EXPECT_FALSE(YamlDoc::parse(std::string("a: \xe2\x82\n"), "p.yaml", &err).has_value());  // cut short
  EXPECT_NE(err.message.find("not UTF-8"), std::string::npos) << err.str();
  // Well-formed text beyond ASCII is read, with its positions counted in characters.
  const auto ok = YamlDoc::parse(std::string("\xef\xbb\xbfname: \"\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80\"\ntab:\t1\n"), "p.yaml", &err);
  ASSERT_TRUE(ok.has_value()) << err.str();
}

TEST(YamlDoc, RefusesAliasesDeepNestingAndSecondDocuments) {
  Diagnostic err;
  EXPECT_FALSE(YamlDoc::parse(std::string("a: &x [1]\nb: *x\n"), "f", &err).has_value());
  EXPECT_NE(err.message.find("aliases"), std::string::npos) << err.str();

  std::string deep(100, '[');
  deep += std::string(100, ']');
  EXPECT_FALSE(YamlDoc::parse(std::string(deep), "f", &err).has_value());
  EXPECT_NE(err.message.find("nesting deeper"), std::string::npos) << err.str();

  EXPECT_FALSE(YamlDoc::parse(std::string("a: 1\n---\nb: 2\n"), "f", &err).has_value());
  EXPECT_NE(err.message.find("more than one YAML document"), std::string::npos) << err.str();
  EXPECT_EQ(err.line, 2);
}

TEST(YamlDoc, SurvivesHostileInput) {
  Diagnostic err;
  // Very deep nesting beyond yaml-cpp's own recursion guard, and a long line.
  const std::string deep(100000, '[');
  EXPECT_FALSE(YamlDoc::parse(std::string(deep), "f", &err).has_value());
  const std::string long_line = "a: " + std::string(5'000'000, 'x') + "\n";
  const auto doc = YamlDoc::parse(std::string(long_line), "f", &err);
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->children(doc->root())[1].value.size(), 5'000'000U);
  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919) % 256);
  (void)YamlDoc::parse(std::string(garbage), "f", &err);  // must simply return
}

TEST(YamlDoc, KeepsPositionsAndQuoting) {
  Diagnostic err;
  const auto doc = YamlDoc::parse(std::string("x:\n  - 12\n  - \"12\"\n"), "f", &err);
  ASSERT_TRUE(doc.has_value());
  const auto top = doc->children(doc->root());
  ASSERT_EQ(top.size(), 2U);
  const auto items = doc->children(top[1]);
  ASSERT_EQ(items.size(), 2U);
  EXPECT_EQ(items[0].line, 2);
  EXPECT_EQ(items[0].column, 5);
  EXPECT_FALSE(items[0].quoted);
  EXPECT_TRUE(items[1].quoted);
  EXPECT_EQ(items[1].value, "12");
}

}  // namespace
}  // namespace tw
