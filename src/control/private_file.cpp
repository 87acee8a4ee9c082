#include "control/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

namespace atp::control {

namespace {

// A fresh temporary file beside `path`, created 0600 and never one that existed.
int create_beside(const std::string& path, std::string& tmp) {
  std::random_device random;
  for (int attempt = 0; attempt < 16; ++attempt) {
    tmp = path + ".tmp." + std::to_string(random());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

}  // namespace

void write_private_file(const std::string& path, const std::string& text) {
  std::string tmp;
  const int fd = create_beside(path, tmp);
  if (fd < 0) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  bool written = ::fchmod(fd, 0600) == 0;  // whatever the umask
  for (std::size_t done = 0; written && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    written = n > 0;
    if (written) done += static_cast<std::size_t>(n);
  }
  written = written && ::fsync(fd) == 0;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(e));
  }
  // The rename itself must survive a crash.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void check_private_folder(const std::string& path, const std::string& what) {
  struct stat st {};
  const std::string fix = "; give it a folder of its own (mkdir -m 0700)";
  if (::lstat(path.c_str(), &st) != 0)
    throw std::runtime_error(what + " " + path + ": " + std::strerror(errno));
  if (S_ISLNK(st.st_mode))
    throw std::runtime_error(what + " " + path + " is a symbolic link" + fix);
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error(what + " " + path + " is not a folder");
  if (st.st_uid != ::geteuid())
    throw std::runtime_error(what + " " + path + " belongs to user " + std::to_string(st.st_uid) +
                             ", not to this one (" + std::to_string(::geteuid()) + ")" + fix);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw std::runtime_error(what + " " + path + " is writable by other users (mode " + mode +
                             ")" + fix);
  }
}

}  // namespace atp::control
