// atp._c10d: the "atp" torch.distributed backend's C++ half (process_group_atp.h). Python's
// atp.distributed registers it and builds its Gloo partner; see docs/pytorch.md.
#include <torch/csrc/utils/pybind.h>

#include "process_group_atp.h"

namespace py = pybind11;
using atp::torch_backend::ProcessGroupATP;

namespace {

// Settings from a dict of the names atp.distributed.Options uses (None and missing: default).
atp::RendezvousSettings settings_of(const py::dict& d) {
  atp::RendezvousSettings s;
  auto text = [&](const char* key, std::string& out) {
    if (d.contains(key) && !d[key].is_none()) out = d[key].cast<std::string>();
  };
  auto number = [&](const char* key, auto& out) {
    if (d.contains(key) && !d[key].is_none()) out = d[key].cast<std::remove_reference_t<decltype(out)>>();
  };
  text("controller", s.controller);
  text("credential", s.credential);
  text("tls_ca_file", s.tls_ca_file);
  text("rack", s.rack);
  text("worker_ip", s.worker_ip);
  text("name", s.name);
  number("values_per_packet", s.terms.values_per_packet);
  number("window", s.terms.window);
  number("parameter_servers", s.terms.parameter_servers);
  number("lease_seconds", s.terms.lease_seconds);
  number("deadline_ms", s.terms.deadline_ms);
  number("max_gradient", s.terms.max_gradient);
  return s;
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "ATP's torch.distributed ProcessGroup (use atp.distributed)";
  py::module::import("torch.distributed");  // ProcessGroup and Store must be known first
  py::class_<ProcessGroupATP, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupATP>>(
      m, "ProcessGroupATP")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       const c10::intrusive_ptr<c10d::ProcessGroup>& gloo, const py::dict& settings) {
             const atp::RendezvousSettings s = settings_of(settings);
             py::gil_scoped_release released;  // the rendezvous waits on the store
             return c10::make_intrusive<ProcessGroupATP>(store, rank, size, gloo, s);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("settings"))
      .def("shutdown", &ProcessGroupATP::shutdown, py::call_guard<py::gil_scoped_release>(),
           "Wait for in-flight allreduces and leave the job (rank 0 removes it)")
      .def_property_readonly("job", &ProcessGroupATP::job, "The job's id on the fabric")
      .def_property_readonly("atp_allreduces", &ProcessGroupATP::atp_allreduces)
      .def_property_readonly("gloo_allreduces", &ProcessGroupATP::gloo_allreduces)
      .def(
          "worker_stats",
          [](const ProcessGroupATP& pg) {
            py::dict d;
            atp::engines::for_each_field(pg.worker_stats(),
                                         [&](const char* name, std::uint64_t v) { d[name] = v; });
            return d;
          },
          "This rank's worker counters: results, done_copies (a reduce-scatter shard of another "
          "rank's, its values not sent to this host), resends, ...")
      .def(
          "traffic",
          [](const ProcessGroupATP& pg) {
            py::dict out;
            for (const auto& [key, t] : pg.traffic()) {
              py::dict d;
              d["atp_calls"] = t.atp_calls;
              d["atp_bytes"] = t.atp_bytes;
              d["gloo_calls"] = t.gloo_calls;
              d["gloo_bytes"] = t.gloo_bytes;
              out[py::str(key)] = d;
            }
            return out;
          },
          "Per call kind and dtype (\"allreduce float16\", ...): calls and tensor bytes through "
          "ATP and through Gloo, for the reductions ATP can carry");
}
