# CMake before 3.25.2 does not know nvcc's C++20 flag, so `cuda_std_20` would stop the
# generate step. Loaded as CMAKE_USER_MAKE_RULES_OVERRIDE_CUDA by CMakeLists.txt there.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
