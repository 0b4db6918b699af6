# Writes and installs blk.pc, with which
#     cc $(pkg-config --cflags --libs blk) app.c            (shared libblk)
#     cc $(pkg-config --static --cflags --libs blk) app.c   (static libblk)
# build and run with plain cc, not mpicc:
# - MPI is public (mpi.h is in blk's headers), so blk.pc requires the
#   pkg-config module of the MPI blk was built with: the first of mpich
#   (MPICH), ompi-c (Open MPI) and mpi (Debian's default MPI) whose -I
#   directories hold the mpi.h the build found, or the one BLK_PKGCONFIG_MPI
#   names. Without one it carries the include directories and libraries
#   FindMPI found, as absolute paths.
# - zstd, pthreads and libm are private: only `--static` lists them.
# - Libs has a run path to libdir, so a program runs from any prefix without
#   LD_LIBRARY_PATH.
# - The prefix is found from the .pc file's own place (${pcfiledir}), so the
#   install tree can be moved, or installed with --prefix elsewhere.
set(BLK_PKGCONFIG_MPI "" CACHE STRING
  "pkg-config module of blk's MPI, required by blk.pc (empty: the first of mpich, ompi-c, mpi that has blk's mpi.h)")

set(mpi_module "${BLK_PKGCONFIG_MPI}")
if(NOT mpi_module AND PKG_CONFIG_EXECUTABLE)
  get_filename_component(mpi_header "${MPI_C_HEADER_DIR}/mpi.h" REALPATH)
  foreach(candidate IN ITEMS mpich ompi-c mpi)
    execute_process(COMMAND ${PKG_CONFIG_EXECUTABLE} --cflags-only-I ${candidate}
      RESULT_VARIABLE rc OUTPUT_VARIABLE flags ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT rc EQUAL 0)
      continue()
    endif()
    separate_arguments(flags UNIX_COMMAND "${flags}")
    foreach(flag IN LISTS flags)
      string(REGEX REPLACE "^-I" "" dir "${flag}")
      get_filename_component(header "${dir}/mpi.h" REALPATH)
      if(EXISTS "${header}" AND header STREQUAL mpi_header)
        set(mpi_module ${candidate})
        break()
      endif()
    endforeach()
    if(mpi_module)
      break()
    endif()
  endforeach()
endif()
set(BLK_PC_REQUIRES "${mpi_module}")
set(BLK_PC_MPI_CFLAGS "")
set(BLK_PC_MPI_LIBS "")
if(NOT mpi_module)
  message(STATUS "blk.pc: no pkg-config module has ${MPI_C_HEADER_DIR}/mpi.h; "
    "it names MPI's include directories and libraries itself (BLK_PKGCONFIG_MPI to choose a module)")
  list(TRANSFORM MPI_C_INCLUDE_DIRS PREPEND "-I" OUTPUT_VARIABLE flags)
  list(JOIN flags " " BLK_PC_MPI_CFLAGS)
  list(JOIN MPI_C_LIBRARIES " " BLK_PC_MPI_LIBS)
else()
  message(STATUS "blk.pc: MPI through pkg-config's ${mpi_module}")
endif()

foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(BLK_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(BLK_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
file(RELATIVE_PATH BLK_PC_PREFIX_REL "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" BLK_PC_PREFIX_REL "${BLK_PC_PREFIX_REL}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/blk.pc.in ${PROJECT_BINARY_DIR}/blk.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/blk.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
