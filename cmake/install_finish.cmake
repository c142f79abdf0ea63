# install_finish.cmake - the last step of `cmake --install` (and `make install`), run in script
# mode with CMAKE_INSTALL_PREFIX the prefix installed to and the SLUICE_* variables the
# top-level CMakeLists.txt sets before it.
#
# 1. The pkg-config files (cmake/<name>.pc.in). Their prefix is found from where the .pc file
#    is, so a tree moved elsewhere or staged with DESTDIR still works. Their Libs carry an RPATH
#    to the libdir unless the prefix is /usr (or /), whose lib directories the dynamic loader
#    searches by itself: a program built with `pkg-config --libs sluice` against /usr/local or
#    /opt/sluice then runs without LD_LIBRARY_PATH.
# 2. ldconfig, when the libdir is one the loader's cache covers (/usr/local/lib on Debian: it is
#    in /etc/ld.so.conf.d), so programs linked with a plain -lsluice find the new library too.
#    Not for a staged install (DESTDIR set); a failure (not root) is only reported.

if(IS_ABSOLUTE "${SLUICE_INSTALL_LIBDIR}")
  set(libdir "${SLUICE_INSTALL_LIBDIR}")
else()
  set(libdir "${CMAKE_INSTALL_PREFIX}/${SLUICE_INSTALL_LIBDIR}")
endif()
string(REGEX REPLACE "/+$" "" prefix "${CMAKE_INSTALL_PREFIX}")

# ---- 1. pkg-config files ----
if(prefix STREQUAL "/usr" OR prefix STREQUAL "")
  set(SLUICE_PC_RPATH "")
else()
  set(SLUICE_PC_RPATH "-Wl,-rpath,\${libdir} ")
endif()
# the names configure_file substitutes in the templates
set(CMAKE_INSTALL_LIBDIR "${SLUICE_INSTALL_LIBDIR}")
set(CMAKE_INSTALL_INCLUDEDIR "${SLUICE_INSTALL_INCLUDEDIR}")
set(PROJECT_VERSION "${SLUICE_VERSION}")
foreach(pc IN LISTS SLUICE_PC_FILES)
  configure_file("${SLUICE_SOURCE_DIR}/cmake/${pc}.pc.in" "${SLUICE_BINARY_DIR}/pc/${pc}.pc" @ONLY)
  file(INSTALL DESTINATION "${libdir}/pkgconfig" TYPE FILE FILES "${SLUICE_BINARY_DIR}/pc/${pc}.pc")
endforeach()

# ---- 2. ldconfig ----
find_program(SLUICE_LDCONFIG ldconfig PATHS /sbin /usr/sbin)
if("$ENV{DESTDIR}" STREQUAL "" AND SLUICE_LDCONFIG AND EXISTS "${libdir}")
  get_filename_component(real "${libdir}" REALPATH)
  # -N -v: print the directories the cache covers, change nothing
  execute_process(COMMAND "${SLUICE_LDCONFIG}" -N -v OUTPUT_VARIABLE scanned ERROR_QUIET)
  string(FIND "\n${scanned}" "\n${real}:" at)
  if(NOT at EQUAL -1)
    execute_process(COMMAND "${SLUICE_LDCONFIG}" RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(rc EQUAL 0)
      message(STATUS "Ran ldconfig: ${real} is in the dynamic loader's cache")
    else()
      message(WARNING "ldconfig failed (${err}); run it as root so programs find libsluice in ${real}")
    endif()
  endif()
endif()
