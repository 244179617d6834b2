//===- file_util.h - Atomic file writes (internal) --------------*- C++ -*-===//
#ifndef MERAK_RT_SRC_FILE_UTIL_H
#define MERAK_RT_SRC_FILE_UTIL_H

#include "merak_rt/status.h"

#include <cstdio>
#include <functional>
#include <string>

namespace merak::rt::detail {

/// strerror(err) as a std::string.
std::string errnoMessage(int err);

/// The directory holding `path` ("." when it has no slash).
std::string parentDirectory(const std::string &path);

/// Writes `path` atomically. `body` writes the content into a temporary file
/// `<path>.tmp.<pid>` in the same directory; then the file is flushed,
/// fsync'ed and closed, renamed over `path`, and the directory is fsync'ed.
/// A reader sees either the old file or the complete new one, also after a
/// crash at any point. On failure the temporary file is removed and `path` is
/// left untouched. `what` names the file in error messages ("checkpoint").
Status writeFileAtomically(const std::string &path, const std::string &what,
                           const std::function<Status(std::FILE *)> &body);

/// fwrite of all `size` bytes, with an error naming `path` on failure.
Status writeAll(std::FILE *file, const void *data, size_t size,
                const std::string &path);

/// fsync of a directory (after creating, renaming or removing entries).
Status fsyncDirectory(const std::string &dir);

/// Reads a whole (small) file into `out`.
Status readSmallFile(const std::string &path, const std::string &what,
                     std::string &out);

} // namespace merak::rt::detail

#endif // MERAK_RT_SRC_FILE_UTIL_H
