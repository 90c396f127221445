# Run by CTest: builds and runs a program that uses etensor the way a downstream project
# would (tests/CMakeLists.txt registers one test per route):
#   MODE=package   cmake --install etensor into a scratch prefix, check that no installed
#                  CMake file names an absolute path of it, the sources or the build tree,
#                  move the prefix elsewhere, then configure the consumer project CONSUMER
#                  with CMAKE_PREFIX_PATH pointing there;
#   MODE=subdir    configure CONSUMER, which adds etensor (ETENSOR_SOURCE_DIR) with
#                  add_subdirectory();
#   MODE=hand      compile HAND_SOURCE with CXX and the flags docs/guide.md lists (HAND_FLAGS
#                  before the source, HAND_LIBS after it), no CMake; HAND_WARNING: a warning
#                  the compile must print (else it must print no "et:" warning).
# ARGS: extra configure arguments (|-separated). NO_CUDA_RUNTIME: the program must not need
# libcudart (a C++-only consumer gets a CPU-only et::et). The program must exit 0.
file(REMOVE_RECURSE ${WORK_DIR})
string(REPLACE "|" ";" args "${ARGS}")
set(program ${WORK_DIR}/build/consumer)
if(MODE STREQUAL "package")
  # Installed into one prefix and used from another: the package must be relocatable, with
  # no absolute path of the install prefix, the sources or the build tree in any file.
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/installed
    RESULT_VARIABLE status OUTPUT_QUIET)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "cmake --install failed")
  endif()
  file(GLOB_RECURSE installed_files ${WORK_DIR}/installed/*.cmake)
  foreach(installed IN LISTS installed_files)
    file(READ ${installed} text)
    foreach(path ${WORK_DIR}/installed ${SOURCE_DIR} ${BUILD_DIR})
      string(FIND "${text}" "${path}" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "the installed ${installed} names the absolute path ${path}: not relocatable")
      endif()
    endforeach()
  endforeach()
  file(RENAME ${WORK_DIR}/installed ${WORK_DIR}/moved)
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK_DIR}/moved)
endif()
# Each step a command line in a variable of its own (a list is a command's arguments).
if(MODE STREQUAL "hand")
  string(REPLACE "|" ";" flags "${HAND_FLAGS}")
  set(program ${WORK_DIR}/consumer)
  file(MAKE_DIRECTORY ${WORK_DIR})
  string(REPLACE "|" ";" libraries "${HAND_LIBS}")
  set(step_compile ${CXX} ${flags} ${HAND_SOURCE} -o ${program} ${libraries})
  set(steps step_compile)
else()
  set(step_configure ${CMAKE_COMMAND} -S ${CONSUMER} -B ${WORK_DIR}/build -DCMAKE_CXX_COMPILER=${CXX}
                     -DETENSOR_SOURCE_DIR=${SOURCE_DIR} ${args})
  set(step_build ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
  set(steps step_configure step_build)
endif()
set(step_run ${program})
list(APPEND steps step_run)
foreach(step IN LISTS steps)
  execute_process(COMMAND ${${step}} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    string(REPLACE ";" " " line "${${step}}")
    message(FATAL_ERROR "step failed: ${line}\n${out}\n${err}")
  endif()
  # HAND_WARNING: what the compile must warn (a file compiled without the CPU libraries'
  # macros); otherwise a hand compile must print no "et:" warning.
  if(step STREQUAL "step_compile")
    if(HAND_WARNING)
      string(FIND "${err}" "${HAND_WARNING}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "the compile did not warn \"${HAND_WARNING}\":\n${err}")
      endif()
      # Once: one warning however many of the libraries' macros are missing.
      string(REGEX MATCHALL "warning: #warning \"et:" warnings "${err}")
      list(LENGTH warnings count)
      if(NOT count EQUAL 1)
        message(FATAL_ERROR "the compile printed ${count} etensor warnings, not one:\n${err}")
      endif()
    else()
      string(FIND "${err}" "et: " at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "the compile printed an etensor warning:\n${err}")
      endif()
    endif()
  endif()
endforeach()
message(STATUS "the program printed: ${out}")
if(NO_CUDA_RUNTIME)
  execute_process(COMMAND readelf -d ${program} OUTPUT_VARIABLE dynamic RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "readelf -d ${program} failed")
  endif()
  if(dynamic MATCHES "libcudart|libcublas|libcudnn")
    message(FATAL_ERROR "a C++-only consumer needs CUDA libraries at run time:\n${dynamic}")
  endif()
endif()
