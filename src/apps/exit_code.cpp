#include "apps/commands.h"

namespace atp::apps {

namespace {
int code = 0;
}

int exit_code() { return code; }
void set_exit_code(int c) { code = c; }

}  // namespace atp::apps
