# Run by CTest: compiles one source and checks the outcome.
#   MODE=pass  the compiler must succeed.
#   MODE=fail  the compiler must fail with exactly one error line, and that line must
#              match EXPECT (our static_assert message), so a user sees one readable line;
#              and the whole report (instantiation backtrace, source echo, notes) must be
#              at most MAX_LINES non-empty lines (default 10), so that it stays readable.
#   With MATCH=log, EXPECT may appear anywhere in the diagnostics instead (for errors
#   whose first line is the compiler's own, e.g. a failed consteval check, whose source
#   line with our message is echoed right below it).
# Inputs: COMPILER, ARGS (a |-separated list), SOURCE, MODE, EXPECT, MATCH, MAX_LINES.
cmake_policy(VERSION 3.24)
string(REPLACE "|" ";" arg_list "${ARGS}")
execute_process(COMMAND ${COMPILER} ${arg_list} ${SOURCE}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(diagnostics "${out}${err}")
# CMake lists split on ';': keep the compiler's semicolons out of the way (EXPECT uses '.').
string(REPLACE ";" "," diagnostics "${diagnostics}")
if(MODE STREQUAL "pass")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "expected ${SOURCE} to compile, but it failed:\n${diagnostics}")
  endif()
  return()
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "expected ${SOURCE} to fail to compile, but it compiled")
endif()
# gcc: "file:12:3: error: ..."; nvcc's front end: "file(12): error: ..."
string(REGEX MATCHALL "(:[0-9]+:[0-9]+: |\\([0-9]+\\): )error[^\n]*" errors "${diagnostics}")
list(LENGTH errors count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "expected exactly one error line, got ${count}:\n${diagnostics}")
endif()
list(GET errors 0 first)
if(MATCH STREQUAL "log")
  if(NOT diagnostics MATCHES "${EXPECT}")
    message(FATAL_ERROR "the diagnostics do not carry the expected message\n  expected: ${EXPECT}\n${diagnostics}")
  endif()
elseif(NOT first MATCHES "${EXPECT}")
  message(FATAL_ERROR "the error line does not carry the expected message\n  expected: ${EXPECT}\n  got: ${first}\n${diagnostics}")
endif()
# Count the non-empty lines without a CMake list (a '[' in a line would join list items):
# each such line becomes one 'x', everything else goes.
if(NOT MAX_LINES)
  set(MAX_LINES 10)
endif()
string(REGEX REPLACE "[^\n]*[^ \t\r\n][^\n]*" "x" marks "${diagnostics}")
string(REGEX REPLACE "[^x]" "" marks "${marks}")
string(LENGTH "${marks}" lines)
if(lines GREATER MAX_LINES)
  message(FATAL_ERROR "the diagnostics take ${lines} non-empty lines, more than ${MAX_LINES}:\n${diagnostics}")
endif()
message(STATUS "failed as expected, in ${lines} lines (at most ${MAX_LINES}): ${first}")
