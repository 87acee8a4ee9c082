#pragma once
// What a job asks of the fabric besides its name and workers: the AdmitJobRequest fields that
// `atp job`, the torch backend's rendezvous and the controller all carry (controller.proto
// documents each; zeros pick the defaults).
#include <cstdint>

namespace atp::controller {

struct JobTerms {
  std::uint32_t values_per_packet = 0, window = 0, parameter_servers = 0;
  float max_gradient = 0;
  std::uint32_t lease_seconds = 0, deadline_ms = 0, static_aggregators = 0;
  bool aggregator_window = false;
};

}  // namespace atp::controller
