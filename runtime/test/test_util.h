//===- test_util.h - Helpers for the runtime's unit tests -------*- C++ -*-===//
#ifndef MERAK_RT_TEST_UTIL_H
#define MERAK_RT_TEST_UTIL_H

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ftw.h>
#include <sstream>
#include <string>
#include <unistd.h>

namespace merak::rt::testing {

/// Replaces the first `from` in `text` by `to`; false when there is none.
inline bool replaceFirst(std::string &text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  if (at == std::string::npos)
    return false;
  text.replace(at, from.size(), to);
  return true;
}

/// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/merak_rt_test.XXXXXX";
    char *made = ::mkdtemp(pattern.data());
    if (made)
      path_ = made;
  }
  ~TempDir() {
    if (!path_.empty())
      ::nftw(
          path_.c_str(),
          [](const char *p, const struct stat *, int, struct FTW *) {
            return std::remove(p);
          },
          16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline bool fileExists(const std::string &path) {
  return ::access(path.c_str(), F_OK) == 0;
}

} // namespace merak::rt::testing

#endif // MERAK_RT_TEST_UTIL_H
