#pragma once
// Files that hold secrets (a job's token in its cluster file, the controller's state with
// every job's credential), written so that no other user can read them at any moment.
#include <string>

namespace atp::control {

// Writes `text` to `path` with mode 0600 from the first byte: a new file of the writer's own in
// the same folder (O_EXCL, so nobody else's file or link is reused), synced, then renamed over
// `path`, and the folder synced, so a crash leaves the old file or the new one whole. Throws
// std::runtime_error naming `path`.
void write_private_file(const std::string& path, const std::string& text);

// Refuses (std::runtime_error naming `what` and the fix) a folder that another local user could
// plant or change files in: `path` must be a real directory (not a symbolic link), owned by
// this process's user, with no group or other write permission. Files written there with
// write_private_file then stay this user's from creation to use.
void check_private_folder(const std::string& path, const std::string& what);

}  // namespace atp::control
