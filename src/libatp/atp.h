/* libatp's C API: one worker of one ATP job, for languages other than C++. */
#ifndef ATP_H
#define ATP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct atp_comm atp_comm;

/* Opens worker `rank` of job `job` described in the cluster file at `config_path`. The job's
   first parameter server hands all workers of this launch a fresh run id at the first
   allreduce, once every worker of the job has asked, so a relaunch on the same daemons never
   meets the last launch's state.
   Returns NULL on failure and writes the reason into `error` (up to `error_size` bytes). */
atp_comm* atp_comm_open(const char* config_path, uint32_t job, uint32_t rank, char* error,
                        size_t error_size);

/* The same with an explicit run id instead of the handshake: all the job's workers must use
   the same one, and the next launch of the job on the same daemons another (the job's first
   parameter server refuses a run id another launch used: the allreduce then fails saying so). */
atp_comm* atp_comm_open_run(const char* config_path, uint32_t job, uint32_t rank, uint16_t run,
                            char* error, size_t error_size);

/* Sums `count` floats of `input` over every worker of the job into `output` (which may be
   `input`). Blocks. Returns 0, or -1 with the reason in atp_comm_error(). */
int atp_allreduce(atp_comm* comm, const float* input, float* output, size_t count);

/* The last error of this communicator ("" if none). Valid until the next call on it. */
const char* atp_comm_error(const atp_comm* comm);

void atp_comm_close(atp_comm* comm);

#ifdef __cplusplus
}
#endif

#endif /* ATP_H */
