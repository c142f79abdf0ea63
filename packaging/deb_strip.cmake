# deb_strip.cmake - run by CPack (CPACK_PRE_BUILD_SCRIPTS) on the staged packages, before they
# are packed, to finish what CPACK_STRIP_FILES begins, as dh_strip does for a Debian package:
# the static libraries lose their debug information (CPack strips only programs and shared
# objects), which also held the build's paths, and every binary loses the .comment and .note
# sections (compiler versions), which lintian calls unneeded.
find_program(strip NAMES strip REQUIRED)
file(GLOB_RECURSE files LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*")
foreach(f IN LISTS files)
  if(IS_SYMLINK "${f}")
    continue()
  endif()
  if(f MATCHES "\\.a$")
    set(how --strip-debug --enable-deterministic-archives)
  elseif(f MATCHES "\\.so(\\.[0-9.]+)?$" OR f MATCHES "/bin/[^/]+$")
    set(how)
  else()
    continue()
  endif()
  execute_process(COMMAND ${strip} ${how} --remove-section=.comment --remove-section=.note ${f}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "strip ${how} ${f} failed")
  endif()
endforeach()
