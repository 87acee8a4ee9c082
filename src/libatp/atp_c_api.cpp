// The C API: a thin shell over Communicator that turns exceptions into return codes.
#include <cstring>
#include <string>

#include "libatp/atp.h"
#include "libatp/communicator.h"

struct atp_comm {
  std::unique_ptr<atp::Communicator> comm;
  std::string error;
};

namespace {

void copy_error(const std::string& message, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  std::strncpy(out, message.c_str(), size - 1);
  out[size - 1] = '\0';
}

atp_comm* open_comm(const char* config_path, uint32_t job, uint32_t rank,
                    std::optional<uint16_t> run, char* error, size_t error_size) {
  try {
    if (config_path == nullptr) throw std::invalid_argument("config_path is NULL");
    auto c = std::make_unique<atp_comm>();
    c->comm = atp::Communicator::from_cluster_file(config_path, job, rank, run);
    return c.release();
  } catch (const std::exception& e) {
    copy_error(e.what(), error, error_size);
    return nullptr;
  }
}

}  // namespace

extern "C" {

atp_comm* atp_comm_open(const char* config_path, uint32_t job, uint32_t rank, char* error,
                        size_t error_size) {
  return open_comm(config_path, job, rank, std::nullopt, error, error_size);
}

atp_comm* atp_comm_open_run(const char* config_path, uint32_t job, uint32_t rank, uint16_t run,
                            char* error, size_t error_size) {
  return open_comm(config_path, job, rank, run, error, error_size);
}

int atp_allreduce(atp_comm* comm, const float* input, float* output, size_t count) {
  if (comm == nullptr) return -1;
  try {
    if (count > 0 && (input == nullptr || output == nullptr))
      throw std::invalid_argument("allreduce: NULL buffer");
    // In place is safe: a fragment's input is reread only until its own result is written.
    comm->comm->allreduce({input, count}, {output, count});
    comm->error.clear();
    return 0;
  } catch (const std::exception& e) {
    comm->error = e.what();
    return -1;
  }
}

const char* atp_comm_error(const atp_comm* comm) { return comm ? comm->error.c_str() : "NULL communicator"; }

void atp_comm_close(atp_comm* comm) { delete comm; }

}  // extern "C"
