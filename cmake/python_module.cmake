# The Python extension module joulepipe._core (src/python, pybind11) and the
# build-tree package build/python/joulepipe/:
#
#   build/python/joulepipe/_core.<abi>.so          the module
#   build/python/joulepipe/**/*.py, *.pyi           copied from python/joulepipe/
#   build/python/joulepipe/sim-nvml/libnvidia-ml.so.1   the simulated NVML library
#
# so that PYTHONPATH=build/python imports the complete package. `pip install .`
# (pyproject.toml, scikit-build-core) installs the module, the package, the
# simulated NVML library and the joulepipe / joulepiped executables (the
# if(SKBUILD) block at the end).
#
# Also a script: `cmake -DJOULEPIPE_COPY_FROM=DIR -DJOULEPIPE_COPY_TO=DIR -P
# python_module.cmake` copies DIR's *.py and *.pyi files (recursively, only
# those that changed), which the build runs on every build.

if(CMAKE_SCRIPT_MODE_FILE)
  file(GLOB_RECURSE sources RELATIVE "${JOULEPIPE_COPY_FROM}"
       "${JOULEPIPE_COPY_FROM}/*.py" "${JOULEPIPE_COPY_FROM}/*.pyi" "${JOULEPIPE_COPY_FROM}/py.typed")
  foreach(source ${sources})
    execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different
                            "${JOULEPIPE_COPY_FROM}/${source}" "${JOULEPIPE_COPY_TO}/${source}"
                    RESULT_VARIABLE result)
    if(NOT result EQUAL 0)
      message(FATAL_ERROR "cannot copy ${JOULEPIPE_COPY_FROM}/${source} to ${JOULEPIPE_COPY_TO}")
    endif()
  endforeach()
  return()
endif()

# Default ON, but optional unless asked for: without pybind11 the C++ build
# goes on without the module, unless -DJOULEPIPE_BUILD_PYTHON=ON was given.
# (JOULEPIPE_PYTHON_DEFAULTED remembers across re-configures that the value
# was the default.)
if(NOT DEFINED JOULEPIPE_BUILD_PYTHON)
  set(JOULEPIPE_PYTHON_DEFAULTED ON CACHE INTERNAL "JOULEPIPE_BUILD_PYTHON was not given")
endif()
if(JOULEPIPE_BUILD_PYTHON AND NOT JOULEPIPE_PYTHON_DEFAULTED)
  set(joulepipe_python_required REQUIRED)
else()
  set(joulepipe_python_required "")
endif()
option(JOULEPIPE_BUILD_PYTHON "Build the Python extension module joulepipe._core" ON)
if(NOT JOULEPIPE_BUILD_PYTHON)
  return()
endif()

# pybind11's CMake files, found through the interpreter that will import the
# module (scikit-build-core sets Python_EXECUTABLE; else the python3 on PATH).
set(PYBIND11_FINDPYTHON ON)
find_package(Python 3.10 COMPONENTS Interpreter Development.Module ${joulepipe_python_required})
set(joulepipe_pybind11_hint "")
if(Python_FOUND)
  execute_process(COMMAND "${Python_EXECUTABLE}" -m pybind11 --cmakedir
                  OUTPUT_VARIABLE joulepipe_pybind11_hint OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  find_package(pybind11 2.12 CONFIG ${joulepipe_python_required} HINTS "${joulepipe_pybind11_hint}")
endif()
if(NOT Python_FOUND OR NOT pybind11_FOUND)
  message(STATUS "joulepipe: Python module joulepipe._core skipped (no Python 3.10+ development "
                 "files or pybind11; pip install pybind11, or -DJOULEPIPE_BUILD_PYTHON=OFF)")
  return()
endif()

set(JOULEPIPE_PYTHON_PACKAGE_DIR ${CMAKE_BINARY_DIR}/python/joulepipe)

# The module links the static parts it binds (never the CLI's or serve's).
# NO_EXTRAS: no LTO (the parts are not built for it) and no strip here;
# scikit-build-core strips on install.
file(GLOB joulepipe_python_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/python/*.cpp)
pybind11_add_module(joulepipe_python_core MODULE NO_EXTRAS ${joulepipe_python_sources})
set_target_properties(joulepipe_python_core PROPERTIES
  OUTPUT_NAME _core
  LIBRARY_OUTPUT_DIRECTORY ${JOULEPIPE_PYTHON_PACKAGE_DIR})
target_link_libraries(joulepipe_python_core PRIVATE
  joulepipe_runtime joulepipe_monitor joulepipe_coord joulepipe_sim joulepipe_tune joulepipe_physics joulepipe_solver
  joulepipe_schedule joulepipe_gpu joulepipe_model Threads::Threads)

# The pure-Python sources and the simulated NVML library, refreshed on every
# build (only changed files are copied).
add_custom_target(joulepipe_python_package ALL
  COMMAND ${CMAKE_COMMAND} -DJOULEPIPE_COPY_FROM=${CMAKE_CURRENT_SOURCE_DIR}/python/joulepipe
          -DJOULEPIPE_COPY_TO=${JOULEPIPE_PYTHON_PACKAGE_DIR} -P ${CMAKE_CURRENT_LIST_FILE}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${JOULEPIPE_PYTHON_PACKAGE_DIR}/sim-nvml
  COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE:joulepipe_sim_nvml>
          ${JOULEPIPE_PYTHON_PACKAGE_DIR}/sim-nvml/libnvidia-ml.so.1
  COMMENT "Updating the Python package in ${JOULEPIPE_PYTHON_PACKAGE_DIR}"
  VERBATIM)
add_dependencies(joulepipe_python_package joulepipe_sim_nvml)
add_dependencies(joulepipe_python_core joulepipe_python_package)

# pip install . (scikit-build-core): the module and the simulated NVML library
# into the package, the executables where pip puts scripts (on PATH). The
# pure-Python files come from pyproject.toml's wheel.packages.
if(SKBUILD)
  install(TARGETS joulepipe_python_core LIBRARY DESTINATION joulepipe)
  install(TARGETS joulepipe joulepiped RUNTIME DESTINATION ${SKBUILD_SCRIPTS_DIR})
  install(FILES $<TARGET_FILE:joulepipe_sim_nvml> DESTINATION joulepipe/sim-nvml
          RENAME libnvidia-ml.so.1)
endif()
