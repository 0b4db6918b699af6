# Test registration helpers. Every test goes through one of these, so the
# rank counts, time-outs and labels live in one place.
#
#   blk_add_unit_test(name src...)       no MPI, runs in milliseconds
#   blk_add_mpi_test(name TARGET exe RANKS 1 2 3 4 [ARGS ...] [LABELS ...]
#                    [TIMEOUT s] [EXPECT regex])
#     registers name.nN as `mpiexec -n N exe ARGS` for each N in RANKS.
#     EXPECT makes it a death test: it passes when the output matches regex
#     and the job exits non-zero (the way blk stops on a programming error).
#   A test whose whole point cannot run here exits 77: ctest reports it as
#   skipped, never as passed. MPICH's mpiexec (hydra) exits with the bitwise
#   OR of the ranks' codes (measured: 77 on every rank gives 77, 77 and 2
#   give 79), so an MPI test skips on every rank or on none.

set(BLK_TEST_TIMEOUT 120 CACHE STRING "default ctest time-out for one MPI test, seconds")

function(blk_add_unit_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE blk_internal m)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  target_compile_options(${name} PRIVATE ${BLK_WARNINGS})
  add_test(NAME ${name} COMMAND ${name})
  # The MPI tests' time-out: test_partners_invariants took over 60 s
  # under ThreadSanitizer while other work loaded the 2-core machine.
  # threads1: it starts no thread (tests/CMakeLists.txt relabels those that do).
  set_tests_properties(${name} PROPERTIES TIMEOUT ${BLK_TEST_TIMEOUT} LABELS "unit;threads1"
                       SKIP_RETURN_CODE 77)
endfunction()

function(blk_add_mpi_test name)
  cmake_parse_arguments(T "" "TARGET;TIMEOUT;EXPECT" "RANKS;ARGS;LABELS" ${ARGN})
  if(NOT T_TARGET)
    message(FATAL_ERROR "blk_add_mpi_test(${name}): TARGET is required")
  endif()
  if(NOT T_RANKS)
    set(T_RANKS 1 2 3 4)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT ${BLK_TEST_TIMEOUT})
  endif()
  foreach(n IN LISTS T_RANKS)
    set(cmd ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:${T_TARGET}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
    if(T_EXPECT)
      # Both conditions: the message, and a non-zero exit of the whole job.
      set(cmd ${CMAKE_COMMAND} -DEXPECT=${T_EXPECT} -P ${PROJECT_SOURCE_DIR}/cmake/expect_failure.cmake ${cmd})
    endif()
    add_test(NAME ${name}.n${n} COMMAND ${cmd})
    # Ranks beyond the cores run oversubscribed; PROCESSORS keeps ctest -j from
    # stacking several 4-rank jobs on two cores.
    set(procs ${n})
    if(procs GREATER 2)
      set(procs 2)
    endif()
    # ranks4: the 4-rank run of a test that also runs at 3. The sanitizer
    # stages of scripts/run.sh leave those to the plain stage (see there).
    set(labels mpi ${T_LABELS})
    if(n EQUAL 4 AND 3 IN_LIST T_RANKS)
      list(APPEND labels ranks4)
    endif()
    set_tests_properties(${name}.n${n} PROPERTIES TIMEOUT ${T_TIMEOUT}
      PROCESSORS ${procs} LABELS "${labels}" SKIP_RETURN_CODE 77)
  endforeach()
endfunction()
