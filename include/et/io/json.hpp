// The JSON a safetensors header holds (RFC 8259): objects, arrays, strings with escapes,
// numbers (kept as text; as_index reads a non-negative integer), true, false, null. A
// recursive-descent parser that throws et::Error naming the source and the byte offset.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "et/runtime/error.hpp"

namespace et::io {

struct JsonMember;

struct Json {
  enum class Kind { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  std::string string;  ///< a string's value, or a number's text
  std::vector<Json> array;
  // A member is a struct of its own, defined below, not a std::pair: a pair of an incomplete
  // Json cannot be checked for its constructors inside Json (clang with libstdc++ refuses it).
  std::vector<JsonMember> object;  ///< in file order, duplicates kept

  /// The first member named `key` of an object, or null.
  const Json* find(const std::string& key) const;

  /// A number that is a non-negative integer below 2^63.
  std::int64_t as_index(const std::string& source) const {
    std::uint64_t value = 0;
    bool ok = kind == Kind::number && !string.empty() && string.size() <= 19;
    for (const char c : string) {
      ok = ok && c >= '0' && c <= '9';
      value = value * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (!ok || value > static_cast<std::uint64_t>(INT64_MAX))
      throw Error("et: " + source + ": expected a non-negative integer, got " +
                  (kind == Kind::number ? string : std::string("a non-number")));
    return static_cast<std::int64_t>(value);
  }
};

/// One member of a JSON object: its name and its value.
struct JsonMember {
  std::string name;
  Json value;
};

inline const Json* Json::find(const std::string& key) const {
  for (const JsonMember& member : object)
    if (member.name == key) return &member.value;
  return nullptr;
}

namespace detail {

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  Json document() {
    Json value = parse(0);
    skip_space();
    if (at_ != text_.size()) fail("text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw Error("et: " + source_ + ": bad JSON at byte " + std::to_string(at_) + ": " + problem);
  }
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r'))
      ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) return ++at_, true;
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  bool take_word(const char* word) {
    const std::string w(word);
    if (text_.compare(at_, w.size(), w) != 0) return false;
    at_ += w.size();
    return true;
  }

  Json parse(int depth) {
    if (depth > 64) fail("nested more than 64 deep");
    skip_space();
    if (at_ >= text_.size()) fail("unexpected end");
    Json value;
    const char c = text_[at_];
    if (c == '{') {
      ++at_;
      value.kind = Json::Kind::object;
      if (take('}')) return value;
      do {
        skip_space();
        std::string key = parse_string();
        expect(':');
        value.object.push_back({std::move(key), parse(depth + 1)});
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      ++at_;
      value.kind = Json::Kind::array;
      if (take(']')) return value;
      do value.array.push_back(parse(depth + 1));
      while (take(','));
      expect(']');
    } else if (c == '"') {
      value.kind = Json::Kind::string;
      value.string = parse_string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.kind = Json::Kind::number;
      const std::size_t start = at_;
      while (at_ < text_.size() && std::string("+-0123456789.eE").find(text_[at_]) != std::string::npos) ++at_;
      value.string = text_.substr(start, at_ - start);
    } else if (take_word("true") || take_word("false")) {
      value.kind = Json::Kind::boolean;
      value.boolean = text_[at_ - 1] == 'e' && text_[at_ - 2] == 'u';
    } else if (!take_word("null")) {
      fail(std::string("unexpected '") + c + "'");
    }
    return value;
  }

  unsigned hex4() {
    if (at_ + 4 > text_.size()) fail("a short \\u escape");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[at_++];
      code = code * 16 + static_cast<unsigned>(h >= '0' && h <= '9'   ? h - '0'
                                               : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                               : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                                      : (fail("a bad \\u escape"), 0));
    }
    return code;
  }

  void append_utf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  std::string parse_string() {
    if (at_ >= text_.size() || text_[at_] != '"') fail("expected a string");
    ++at_;
    std::string out;
    while (true) {
      if (at_ >= text_.size()) fail("an unterminated string");
      const char c = text_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) fail("an unterminated escape");
      const char e = text_[at_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned code = hex4();
          if (code >= 0xD800 && code < 0xDC00 && take_word("\\u")) {  // a surrogate pair
            const unsigned low = hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("a bad surrogate pair");
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, code);
          break;
        }
        default: fail(std::string("the escape \\") + e);
      }
    }
  }

  const std::string& text_;
  const std::string& source_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// Parses `text` (et::Error naming `source` on bad JSON).
inline Json parse_json(const std::string& text, const std::string& source) {
  return detail::JsonParser(text, source).document();
}

/// `value` as a JSON string literal (quotes, backslashes and control characters escaped).
inline std::string json_string(const std::string& value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace et::io
