# Finds GoogleTest for the test executables and sets PAGODA_GTEST_MAIN to the
# target to link. Order: a vendored third_party/googletest (what the GPU
# machine uses: it has no GTest installed), Debian's /usr/src/googletest,
# then an installed GTest package. Included by tests/CMakeLists.txt and by the
# standalone GPU-check project in tools/CMakeLists.txt; PAGODA_ROOT_DIR must
# name the repository root.
if(EXISTS ${PAGODA_ROOT_DIR}/third_party/googletest/CMakeLists.txt)
  set(PAGODA_GTEST_SRC ${PAGODA_ROOT_DIR}/third_party/googletest)
elseif(EXISTS /usr/src/googletest/CMakeLists.txt)
  set(PAGODA_GTEST_SRC /usr/src/googletest)
endif()
if(PAGODA_GTEST_SRC)
  set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${PAGODA_GTEST_SRC} ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
  set(PAGODA_GTEST_MAIN gtest_main)
else()
  find_package(GTest REQUIRED)
  set(PAGODA_GTEST_MAIN GTest::gtest_main)
endif()
