# Finds zstd as the imported target PkgConfig::ZSTD, the one libblk links.
# Included by blk's own build and, for a static libblk, by the installed
# blkConfig.cmake, so that a consumer's find_package(blk) recreates the very
# target the library's link interface names. pkg-config's libzstd is the one
# interface every zstd install has under one name (zstd's own CMake package
# exports zstd::libzstd_shared / zstd::libzstd_static in Debian's 1.5.4,
# later releases add zstd::libzstd, and some builds do not ship it).
# Leaves PkgConfig::ZSTD undefined when zstd is not found; the includer says
# what is missing. Also sets pkg_check_modules' ZSTD_* variables.
if(NOT TARGET PkgConfig::ZSTD)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(ZSTD QUIET IMPORTED_TARGET libzstd)
  endif()
endif()
