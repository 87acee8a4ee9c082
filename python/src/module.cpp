// `atp._atp`: the worker library for Python. A Communicator sums float32 buffers (numpy arrays,
// or anything exposing a writable C-contiguous float32 buffer) over its job, in place or into
// another buffer, without copying them: the engine reads the input and writes the result
// straight through the buffers' memory. The GIL is released while waiting.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "libatp/communicator.h"

namespace py = pybind11;

namespace {

// A float32 view of a Python buffer, held for as long as the engine may touch it.
struct FloatBuffer {
  py::buffer owner;
  py::buffer_info info;
  FloatBuffer(py::buffer b, bool writable, const char* what) : owner(b), info(b.request(writable)) {
    // "f", or "<f" / "=f" (ctypes, struct): float32 in this machine's (little-endian) order.
    if (info.itemsize != 4 ||
        (info.format != "f" && info.format != "<f" && info.format != "=f"))
      throw py::type_error(std::string(what) + " must hold float32 values, not format '" +
                           info.format + "'");
    py::ssize_t expected = info.itemsize;
    for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
      if (info.shape[d] > 1 && info.strides[d] != expected)
        throw py::value_error(std::string(what) + " must be C-contiguous");
      expected *= info.shape[d];
    }
  }
  std::span<float> span() { return {static_cast<float*>(info.ptr), static_cast<std::size_t>(info.size)}; }
};

// One allreduce in flight. Keeps both buffers alive, and waits in its destructor, so Python
// can never free memory the I/O thread still writes.
class Work {
 public:
  // `out` empty: in place.
  Work(std::shared_ptr<atp::Communicator> comm, std::unique_ptr<FloatBuffer> in,
       std::unique_ptr<FloatBuffer> out)
      : comm_(std::move(comm)), in_(std::move(in)), out_(std::move(out)) {
    done_ = comm_->allreduce_async(in_->span(), output().span()).share();
  }
  ~Work() {
    py::gil_scoped_release release;
    done_.wait();
  }
  // Returns the output buffer; raises RuntimeError with the reason if the allreduce failed.
  // Any number of threads may wait, any number of times (a shared_future).
  py::object wait() {
    {
      py::gil_scoped_release release;
      done_.wait();
    }
    done_.get();  // rethrows the engine's error
    return output().owner;
  }
  bool is_completed() const {
    return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

 private:
  FloatBuffer& output() { return out_ ? *out_ : *in_; }

  std::shared_ptr<atp::Communicator> comm_;
  std::unique_ptr<FloatBuffer> in_, out_;
  std::shared_future<void> done_;
};

py::dict stats_dict(const atp::engines::WorkerStats& s) {
  py::dict d;
  atp::engines::for_each_field(s, [&](const char* name, std::uint64_t v) { d[name] = v; });
  return d;
}

py::dict config_dict(const atp::engines::WorkerConfig& c, std::size_t rank) {
  py::dict d;
  d["job"] = c.job;
  d["rank"] = rank;
  d["workers"] = c.job_workers;
  d["rack"] = c.rack;
  d["rank_in_rack"] = c.rank_in_rack;
  d["values_per_packet"] = c.values_per_packet;
  d["window"] = c.window;
  d["scale"] = c.scale;
  d["parameter_servers"] = c.parameter_servers;
  d["deadline_s"] = static_cast<double>(c.deadline) / atp::kSecond;
  d["run"] = c.run ? py::object(py::int_(*c.run)) : py::object(py::none());
  return d;
}

struct PyCommunicator {
  std::shared_ptr<atp::Communicator> comm;
  std::size_t rank;

  PyCommunicator(const std::string& cluster_file, std::uint32_t job, std::size_t rank_,
                 std::optional<std::uint16_t> run)
      : rank(rank_) {
    try {
      comm = atp::Communicator::from_cluster_file(cluster_file, job, rank, run);
    } catch (const std::invalid_argument& e) {
      throw py::value_error(e.what());
    }
  }
  std::unique_ptr<Work> start(py::buffer input, py::object output) {
    auto in = std::make_unique<FloatBuffer>(input, output.is_none(), "input");
    std::unique_ptr<FloatBuffer> out;
    if (!output.is_none()) {
      out = std::make_unique<FloatBuffer>(output.cast<py::buffer>(), true, "output");
      if (in->info.size != out->info.size)
        throw py::value_error("input has " + std::to_string(in->info.size) + " values, output " +
                              std::to_string(out->info.size));
    }
    return std::make_unique<Work>(comm, std::move(in), std::move(out));
  }
};

}  // namespace

PYBIND11_MODULE(_atp, m) {
  m.doc() = "ATP worker library: in-network gradient aggregation (see atp.Communicator)";

  py::class_<Work>(m, "Work", "An allreduce in flight; wait() returns the output buffer.")
      .def("wait", &Work::wait, "Block until the sum is in the output; raises RuntimeError on failure.")
      .def("is_completed", &Work::is_completed);

  py::class_<PyCommunicator>(m, "Communicator",
                             "One worker of one job, as the cluster file describes it.")
      .def(py::init<const std::string&, std::uint32_t, std::size_t,
                    std::optional<std::uint16_t>>(),
           py::arg("cluster_file"), py::arg("job"), py::arg("rank"), py::arg("run") = py::none(),
           "run: None (the default) lets the job's first PS hand every worker of this launch "
           "the same fresh run id; or an explicit id (0..65535), the same for all the job's "
           "workers and another for the next launch on the same daemons.")
      .def(
          "allreduce",
          [](PyCommunicator& self, py::buffer input, py::object output) {
            return self.start(input, output)->wait();
          },
          py::arg("input"), py::arg("output") = py::none(),
          "Sum a float32 buffer over every worker of the job, in place (or into `output`). "
          "Returns the output buffer. Raises RuntimeError if the job cannot finish.")
      .def("allreduce_async", &PyCommunicator::start, py::arg("input"),
           py::arg("output") = py::none(),
           "Start an allreduce; returns a Work. Several may be in flight; buffers stay referenced "
           "until it completes.")
      .def_property_readonly("stats", [](const PyCommunicator& self) { return stats_dict(self.comm->stats()); })
      .def_property_readonly(
          "run", [](const PyCommunicator& self) { return self.comm->run(); },
          "The run id this worker's fragments name: the one given, or the one the job's first "
          "PS handed out (None until the first allreduce got it).")
      .def_property_readonly("config", [](const PyCommunicator& self) {
        return config_dict(self.comm->config(), self.rank);
      });
}
