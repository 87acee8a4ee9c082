/* Compiled as C: proves atp.h is a usable C header, and gives the C++ test a C caller. */
#include "libatp/atp.h"

int atp_test_c_allreduce(const char* config, uint32_t job, uint32_t rank, const float* in,
                         float* out, size_t n, char* error, size_t error_size) {
  atp_comm* comm = atp_comm_open(config, job, rank, error, error_size);
  if (comm == NULL) return -1;
  int rc = atp_allreduce(comm, in, out, n);
  if (rc != 0) {
    const char* e = atp_comm_error(comm);
    size_t i = 0;
    for (; e[i] != '\0' && i + 1 < error_size; ++i) error[i] = e[i];
    error[i] = '\0';
  }
  atp_comm_close(comm);
  return rc;
}
