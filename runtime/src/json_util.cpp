//===- json_util.cpp - What the runtime adds to nlohmann-json -------------===//
#include "json_util.h"

#include <charconv>
#include <cmath>
#include <set>

namespace merak::rt {

ParsedJson parseJson(std::string_view text) {
  using Event = nlohmann::json::parse_event_t;
  // The open objects and lists: an object's keys so far, a list's index.
  struct Open {
    bool object;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
  };
  std::vector<Open> open;
  ParsedJson out;
  auto element = [&]() { // a value ended: the next one of an open list
    if (!open.empty() && !open.back().object)
      ++open.back().index;
  };
  auto callback = [&](int, Event event, nlohmann::json &v) {
    switch (event) {
    case Event::object_start:
    case Event::array_start:
      open.push_back({event == Event::object_start, {}, {}, 0});
      break;
    case Event::key: {
      Open &o = open.back();
      o.key = v.get<std::string>();
      if (!o.keys.insert(o.key).second && out.duplicate.empty())
        for (const Open &around : open)
          out.duplicate.push_back(around.object ? around.key
                                                : "[" + std::to_string(around.index) + "]");
      break;
    }
    case Event::object_end:
    case Event::array_end:
      open.pop_back();
      element();
      break;
    case Event::value:
      element();
      break;
    }
    return true;
  };
  out.value = nlohmann::json::parse(text.begin(), text.end(), callback);
  return out;
}

std::string jsonErrorText(const std::exception &e) {
  std::string what = e.what();
  if (what.rfind("[json.exception.", 0) == 0)
    if (size_t end = what.find("] "); end != std::string::npos)
      return what.substr(end + 2);
  return what;
}

std::optional<int64_t> nonNegativeInteger(const nlohmann::json &v) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX))
    return v.get<int64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return v.get<int64_t>();
  return std::nullopt;
}

bool isValidUtf8(std::string_view s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error &) { // 316: invalid UTF-8
    return false;
  }
}

void appendString(std::string &out, std::string_view s) {
  out += nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void appendNumber(std::string &out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buffer[64];
  auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), v);
  (void)ec; // 64 bytes always suffice
  std::string text(buffer, ptr);
  // "6e-04" -> "6e-4" (valid either way; the short form reads better).
  if (size_t e = text.find('e'); e != std::string::npos) {
    size_t digits = e + 1;
    if (digits < text.size() && (text[digits] == '-' || text[digits] == '+'))
      ++digits;
    while (digits + 1 < text.size() && text[digits] == '0')
      text.erase(digits, 1);
  }
  out += text;
}

} // namespace merak::rt
