// The trap test's child process (tests/gpu/test_faults.cu): the GPU tests' main() runs it,
// and no Catch2 test case, when the variable is set; the test sets it for the process it
// starts, whose CUDA context the trap then breaks, not the test's own.
#pragma once

namespace test {

inline constexpr const char* trap_child_variable = "ET_TEST_TRAP_CHILD";

/// Traps a kernel, checks that every later etensor call throws et::CudaError, prints what it
/// saw ("trap-child: ..." lines) and returns the process's exit status (0: all held).
int trap_child_main();

}  // namespace test
