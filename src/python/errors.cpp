// C++ exceptions as Python exceptions. One translator, most specific type
// first: gpu::GpuError derives from model::InputError in C++ but is a
// RuntimeError in Python (an environment problem, not a bad value).
#include <exception>

#include "bindings.hpp"
#include "joulepipe/coord/job.hpp"
#include "joulepipe/gpu/error.hpp"
#include "joulepipe/model/error.hpp"

namespace joulepipe::python {

namespace {

// Owned by the module for the life of the process (never freed: the
// translator may run during interpreter shutdown).
PyObject* input_error = nullptr;
PyObject* gpu_error = nullptr;
PyObject* job_state_error = nullptr;
PyObject* cancelled = nullptr;

PyObject* NewException(py::module_& m, const char* name, PyObject* base, const char* doc,
                       PyObject* dict = nullptr) {
  const std::string qualified = std::string("joulepipe._core.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, dict);
  if (type == nullptr) throw py::error_already_set();
  m.attr(name) = py::handle(type);  // the module holds a reference too
  return type;
}

void Raise(PyObject* type, const char* message) {
  PyErr_SetString(type, message);
}

void RaiseInputError(const model::InputError& e) {
  py::object error = py::reinterpret_borrow<py::object>(input_error)(py::str(e.what()));
  error.attr("field") = py::str(e.field());
  PyErr_SetObject(input_error, error.ptr());
}

}  // namespace

void BindErrors(py::module_& m) {
  py::dict defaults;
  defaults["field"] = py::str("");
  input_error = NewException(
      m, "InputError", PyExc_ValueError,
      "Bad input (a value, a file). str(e) is the library's message; e.field names the C++ "
      "field it is about (e.g. 'Spec::stages'), '' when it names a file position instead.",
      defaults.ptr());
  gpu_error = NewException(m, "GpuError", PyExc_RuntimeError,
                           "NVML cannot be used, an NVML call failed, a MIG GPU, or a value the "
                           "GPU does not accept. str(e) says which and how to fix it.");
  job_state_error = NewException(m, "JobStateError", PyExc_RuntimeError,
                                 "A CoordJob call its phase does not allow (e.g. a profile "
                                 "after planning).");
  cancelled = NewException(m, "Cancelled", PyExc_RuntimeError, "A long task was cancelled.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const model::Cancelled& e) {
      Raise(cancelled, e.what());
    } catch (const coord::JobStateError& e) {
      Raise(job_state_error, e.what());
    } catch (const gpu::GpuError& e) {
      Raise(gpu_error, e.what());
    } catch (const model::InputError& e) {
      RaiseInputError(e);
    }
  });
}

}  // namespace joulepipe::python
